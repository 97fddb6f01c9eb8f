package redisstore

import (
	_ "embed" // the Lua scripts

	"github.com/redis/go-redis/v9"
)

// The scripts: each but resume and halt is the clock and the common prelude
// followed by one operation; resume is the clock and its own body. They are run with EVALSHA; go-redis falls back to EVAL, which
// caches the script again, when the server answers NOSCRIPT (a restart, a
// failover, SCRIPT FLUSH). halt, small and run only to re-sync after an
// outage, is sent with EVAL in a pipeline.
var (
	//go:embed lua/clock.lua
	luaClock string
	//go:embed lua/common.lua
	luaCommon string
	//go:embed lua/admit.lua
	luaAdmit string
	//go:embed lua/record.lua
	luaRecord string
	//go:embed lua/state.lua
	luaState string
	//go:embed lua/ceiling.lua
	luaCeiling string
	//go:embed lua/resume.lua
	luaResume string
	//go:embed lua/halt.lua
	luaHalt string
)

// scripts are the loaded scripts of a Store.
type scripts struct {
	admit, record, state, ceiling, resume *redis.Script
}

func newScripts() scripts {
	return scriptsWith(func(src string) string { return src })
}

// scriptsWith returns the scripts, each source passed through edit first
// (the identity but in tests that plant defects).
func scriptsWith(edit func(string) string) scripts {
	mk := func(name, op string) *redis.Script {
		return redis.NewScript(edit("local OP = '" + name + "'\n" + luaClock + luaCommon + "\n" + op))
	}
	return scripts{
		admit:   mk("admit", luaAdmit),
		record:  mk("record", luaRecord),
		state:   mk("state", luaState),
		ceiling: mk("ceiling", luaCeiling),
		resume:  redis.NewScript(edit(luaClock + luaResume)),
	}
}
