"""The orchestrator's decision after a preflight run.

The same rules as decide.go and decide.sh (the Go test checks that all
three agree on real preflight output):

1. An exit status other than 0, 3 or 4 (1 failure, 2 usage, 130
   interrupted) is an error: fix the input, do not crawl.
2. The JSON must parse, its status must match the exit status, and
   CRITICAL must come with recommendation.halt; otherwise error.
3. CRITICAL (exit 4) halts: nothing is crawled, someone looks; the
   reason names preflight's reasons.
4. HEALTHY and DEGRADED crawl with max_concurrency requests in flight, a
   first retry delay of initial_delay_sec, and without the halt_hosts.

No Airflow import here, so that the rules can be run on their own:
    python3 preflight_decision.py EXIT_CODE < report.json
"""

import json
import sys

EXIT_FOR = {"HEALTHY": 0, "DEGRADED": 3, "CRITICAL": 4}


def _fail(reason):
    return {"action": "error", "status": "", "max_concurrency": 0,
            "initial_delay_sec": 0, "skip_hosts": [], "reason": reason}


def decide(exit_code, stdout):
    """Return the decision for preflight's exit status and standard output."""
    if exit_code not in (0, 3, 4):
        return _fail("preflight exited %d: failure, usage error or interrupted" % exit_code)
    try:
        diagnosis = json.loads(stdout)["diagnosis"]
        status = diagnosis["status"]
        recommendation = diagnosis["recommendation"]
    except (ValueError, KeyError, TypeError):
        return _fail("preflight printed no report")
    if EXIT_FOR.get(status) != exit_code:
        return _fail("status %r does not match exit %d" % (status, exit_code))
    if (status == "CRITICAL") != bool(recommendation.get("halt")):
        return _fail("status %s with halt %s" % (status, recommendation.get("halt")))
    if status == "CRITICAL":
        return {"action": "halt", "status": status, "max_concurrency": 0,
                "initial_delay_sec": 0, "skip_hosts": [],
                "reason": "preflight is CRITICAL: " + "; ".join(diagnosis.get("reasons") or [])}
    workers = recommendation.get("max_concurrency", 0)
    if workers < 1:
        return _fail("max_concurrency %d" % workers)
    return {
        "action": "crawl",
        "status": status,
        "max_concurrency": workers,
        "initial_delay_sec": diagnosis["recommended_backoff"]["initial_delay_sec"],
        "skip_hosts": recommendation.get("halt_hosts") or [],
        "reason": "",
    }


if __name__ == "__main__":
    print(json.dumps(decide(int(sys.argv[1]), sys.stdin.read())))
