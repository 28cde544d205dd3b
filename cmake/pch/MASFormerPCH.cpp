// The precompiled header target: no code of its own (cmake/PCH.cmake).
