package storage

import (
	"encoding/json"
	"testing"
	"time"

	"stormwatch/agents/internal/sample"
)

func rawTargets(t *testing.T, targets ...map[string]any) []json.RawMessage {
	t.Helper()
	var out []json.RawMessage
	for _, tg := range targets {
		b, err := json.Marshal(tg)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

// taskOf returns the running task of a target, nil when none runs.
func taskOf(m *Manager, id string) *task {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.running[id]
}

func waitDone(t *testing.T, tk *task) {
	t.Helper()
	select {
	case <-tk.done:
	case <-time.After(30 * time.Second):
		t.Fatal("the target's run did not end")
	}
}

func TestApplyKeepsUnchangedTargetsRestartsChangedOnesAndStopsRemovedOnes(t *testing.T) {
	em := need(t, ProviderS3)
	bucket := bucketName(t)
	createBucket(t, em, bucket)
	one := map[string]any{"interval_s": 1, "contents": []string{"binary"}, "sizes_bytes": map[string]any{"binary": []int64{1024}}}
	target := targetFor(em, bucket, one)
	id := target["target_id"].(string)
	col, m, _ := running(t, testLogger(t))
	m.Apply(rawTargets(t, target))
	col.waitFor(t, 20*time.Second, "two cycles", func(ss []sample.Storage) bool {
		return len(find(ss, func(s sample.Storage) bool { return s.Op == opGet && okSample(s) })) >= 2
	})
	first := taskOf(m, id)

	// The same entry, re-serialised differently, leaves the run alone.
	m.Apply([]json.RawMessage{json.RawMessage(" " + string(rawTargets(t, target)[0]) + "\n")})
	if taskOf(m, id) != first {
		t.Fatal("an unchanged target was restarted")
	}

	changed := targetFor(em, bucket, map[string]any{"interval_s": 1, "contents": []string{"binary"},
		"sizes_bytes": map[string]any{"binary": []int64{2048}}})
	m.Apply(rawTargets(t, changed))
	waitDone(t, first)
	col.waitFor(t, 20*time.Second, "the changed size measured", func(ss []sample.Storage) bool {
		return len(find(ss, func(s sample.Storage) bool { return s.Op == opGet && s.SizeBytes == 2048 && okSample(s) })) > 0
	})
	second := taskOf(m, id)
	if second == nil || second == first {
		t.Fatal("the changed target was not restarted")
	}

	m.Apply(nil)
	waitDone(t, second)
	if taskOf(m, id) != nil {
		t.Fatal("a removed target still runs")
	}
	if left := remaining(t, changed); len(left) != 0 {
		t.Fatalf("the stopped target left objects: %v", left)
	}
}

func TestInvalidEntriesAreSkippedWhileValidOnesRun(t *testing.T) {
	em := need(t, ProviderGCS)
	bucket := bucketName(t)
	createBucket(t, em, bucket)
	good := targetFor(em, bucket, map[string]any{"contents": []string{"binary"}, "sizes_bytes": map[string]any{"binary": []int64{1024}}})
	col, m, _ := running(t, testLogger(t))
	m.Apply(append(rawTargets(t, map[string]any{"target_id": "bad", "provider": "s3"}, good, good), json.RawMessage(`{not json`)))
	ss := col.waitFor(t, 20*time.Second, "the valid target's GET", func(ss []sample.Storage) bool {
		return len(find(ss, func(s sample.Storage) bool { return s.Op == opGet })) > 0
	})
	for _, s := range ss {
		if s.TargetID != good["target_id"] {
			t.Fatalf("a sample of an invalid target: %+v", s)
		}
	}
	m.mu.Lock()
	n := len(m.running)
	m.mu.Unlock()
	if n != 1 {
		t.Fatalf("%d targets run, want the one valid (its duplicate skipped)", n)
	}
}
