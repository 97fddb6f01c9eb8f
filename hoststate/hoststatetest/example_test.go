package hoststatetest_test

import (
	"fmt"

	"github.com/egresskit/egresskit/hoststate/hoststatetest"
)

// Every Store implementation — in memory, in Redis — must pass the same
// scenarios, with the same expected values.
func ExampleScenarios() {
	for _, s := range hoststatetest.Scenarios() {
		fmt.Println(s.Name)
	}
	// Output:
	// TransientFailuresOpen
	// OpenSpendsNoToken
	// ProbeSuccessCloses
	// ProbeFailureReopens
	// NeutralOutcomes
	// StaleAdmissionIgnored
	// RefusedHaltsOnce
	// HaltLogQueueAndHistory
	// RefusedHaltsWhateverAdmission
	// ThrottledHalvesAndPauses
	// ThrottleSettles
	// SettleUnderCeiling
	// LearntCeiling
	// LateOKsRevise
	// ReleaseAfterPause
	// LongerRetryAfterNeverSooner
	// ThrottledOpensOnlyAtFloor
	// SlowHost
	// QuotaSetsRate
	// AdmissionCarriesRate
	// SetCeiling
	// StrayRefusalRecovers
	// BurstyDemandIsNoQueue
	// StrayAfterFirstCut
	// AdmissionCarriesBaseLatency
	// LimitBelowDemand
	// RefusalAtPaceIsALimit
	// RefusalWithQueueIsALimit
	// SlowingHostSlows
	// FarHostNotPenalised
	// QueueIsNoBase
	// SlowingLearnsWhatItServes
	// ProbeThatSlowsEnds
	// SlowingPauseIsBounded
	// ProbeAfterOKs
	// StallIsNotSlowing
	// ThrottleStorm
	// StillShutWaitsLonger
	// FirstContactOneToken
	// DeadlineTakesNothing
	// DeadlineReleasesProbe
	// LeakedProbeLeaseEnds
	// EvictionKeepsOpenHaltedPaused
}
