#!/bin/sh
# decide.sh REPORT EXIT_CODE: the orchestrator's decision after a preflight
# run, for the CronJob. It prints the decision as one JSON object and exits
# 0 to crawl, 1 on error, 3 to halt. The same rules as decide.go and
# preflight_decision.py:
#   1. exit status other than 0, 3, 4 (1 failure, 2 usage, 130 interrupted):
#      error;
#   2. the JSON must parse, its status match the exit status, and CRITICAL
#      come with recommendation.halt; otherwise error;
#   3. CRITICAL halts;
#   4. HEALTHY and DEGRADED crawl with max_concurrency, initial_delay_sec,
#      and without the halt_hosts.
# Needs jq.
report=$1
code=$2

fail() {
	jq -cn --arg r "$1" '{action:"error",status:"",max_concurrency:0,initial_delay_sec:0,skip_hosts:[],reason:$r}'
	exit 1
}

case $code in
0 | 3 | 4) ;;
*) fail "preflight exited $code: failure, usage error or interrupted" ;;
esac
status=$(jq -er '.diagnosis.status' "$report" 2>/dev/null) || fail "preflight printed no report"
halt=$(jq -r '.diagnosis.recommendation.halt' "$report")
case $status:$code in
HEALTHY:0 | DEGRADED:3 | CRITICAL:4) ;;
*) fail "status \"$status\" does not match exit $code" ;;
esac
if { [ "$status" = CRITICAL ] && [ "$halt" != true ]; } || { [ "$status" != CRITICAL ] && [ "$halt" != false ]; }; then
	fail "status $status with halt $halt"
fi
if [ "$status" = CRITICAL ]; then
	jq -c '{action:"halt",status:.diagnosis.status,max_concurrency:0,initial_delay_sec:0,skip_hosts:[],
		reason:("preflight is CRITICAL: " + ((.diagnosis.reasons // []) | join("; ")))}' "$report"
	exit 3
fi
workers=$(jq -r '.diagnosis.recommendation.max_concurrency // 0' "$report")
[ "$workers" -ge 1 ] 2>/dev/null || fail "max_concurrency $workers"
jq -c '{action:"crawl",status:.diagnosis.status,max_concurrency:.diagnosis.recommendation.max_concurrency,
	initial_delay_sec:.diagnosis.recommended_backoff.initial_delay_sec,
	skip_hosts:(.diagnosis.recommendation.halt_hosts // []),reason:""}' "$report"
