package redisstore

import (
	_ "embed" // the Lua scripts
	"strings"

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
	//go:embed lua/deferred.lua
	luaDeferred string
)

// recordBegins and recordEnds mark, in record.lua, the application of one
// outcome, which the scripts repeat for each deferred record.
const (
	recordBegins = "-- (the outcome's application begins: deferred.lua repeats it)\n"
	recordEnds   = "-- (the outcome's application ends)\n"
)

// scripts are the loaded scripts of a Store.
type scripts struct {
	admit, record, state, ceiling, resume *redis.Script
	// flush applies the deferred OK records of a host and nothing else;
	// admit, record, state and ceiling apply them first too (see
	// deferred.lua).
	flush *redis.Script
}

func newScripts() scripts {
	return scriptsWith(func(src string) string { return src })
}

// scriptsWith returns the scripts, each source passed through edit first
// (the identity but in tests that plant defects).
func scriptsWith(edit func(string) string) scripts {
	// withDeferred is the clock, the prelude and op, with the application
	// of the deferred records, from ARGV[at] on, followed by then, between
	// the prelude and op (see deferred.lua). It is inserted after edit, so
	// that an edit reaches the text of the prelude and op as written; the
	// application of each record is record's, edited too.
	const mark = "-- deferred records\n"
	_, apply, _ := strings.Cut(luaRecord, recordBegins)
	apply, _, _ = strings.Cut(apply, recordEnds)
	withDeferred := func(name, at, then, op string) *redis.Script {
		src := edit("local OP = '" + name + "'\n" + luaClock + luaCommon + "\n" + mark + op)
		ins := strings.NewReplacer("$AT", at, "$THEN", then, "-- $RECORD\n", edit(apply)).Replace(luaDeferred)
		return redis.NewScript(strings.Replace(src, mark, ins, 1))
	}
	return scripts{
		admit:   withDeferred("admit", "18", "if halted then save() end", luaAdmit),
		record:  withDeferred("record", "20", "", luaRecord),
		flush:   withDeferred("flush", "15", "save()", "return 1"),
		state:   withDeferred("state", "15", "save()", luaState),
		ceiling: withDeferred("ceiling", "16", "", luaCeiling),
		resume:  redis.NewScript(edit(luaClock + luaResume)),
	}
}
