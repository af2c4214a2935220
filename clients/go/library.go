package ratelimit

import _ "embed"

// LibrarySource is the Functions library (functions/ratelimit.lua in the repository, copied here
// because go:embed reads only this module's files; a test holds the two equal): what the limiter
// loads with FUNCTION LOAD on a server without the module.
//
//go:embed ratelimit.lua
var LibrarySource string

// LibraryName is the library's name in FUNCTION LIST.
const LibraryName = "ratelimit"
