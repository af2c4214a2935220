package ratelimit

import _ "embed"

// The copy of functions/ratelimit.lua that go:embed can read (it reads only this module's files);
// make go-ready and a test fail when the two differ.
//go:generate cp ../../functions/ratelimit.lua ratelimit.lua

//go:embed ratelimit.lua
var librarySource string

// LibrarySource is the Functions library, functions/ratelimit.lua in the repository: what the
// limiter loads with FUNCTION LOAD on a server without the module.
func LibrarySource() string {
	return librarySource
}

// LibraryName is the library's name in FUNCTION LIST.
const LibraryName = "ratelimit"
