package storage

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/sas"

	"stormwatch/agents/internal/sample"
)

// collector receives the manager's samples and lets a test wait for a condition on them.
type collector struct {
	mu      sync.Mutex
	samples []sample.Storage
	changed chan struct{}
	// onEmit, when set, runs on the probe's goroutine before the sample is kept: the cycle
	// waits for it, so it sees the store as the sample left it.
	onEmit func(sample.Storage)
}

func newCollector() *collector { return &collector{changed: make(chan struct{}, 1)} }

func (c *collector) emit(s sample.Storage) {
	if c.onEmit != nil {
		c.onEmit(s)
	}
	c.mu.Lock()
	c.samples = append(c.samples, s)
	c.mu.Unlock()
	select {
	case c.changed <- struct{}{}:
	default:
	}
}

func (c *collector) snapshot() []sample.Storage {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.samples)
}

// waitFor polls cond on every new sample until it holds or the deadline passes.
func (c *collector) waitFor(t *testing.T, timeout time.Duration, what string, cond func([]sample.Storage) bool) []sample.Storage {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		s := c.snapshot()
		if cond(s) {
			return s
		}
		select {
		case <-c.changed:
		case <-deadline.C:
			t.Fatalf("timed out waiting for %s; %d samples:\n%s", what, len(s), dump(s))
		}
	}
}

func dump(ss []sample.Storage) string {
	var b bytes.Buffer
	for _, s := range ss {
		lat := "-"
		if s.LatencyUS != nil {
			lat = fmt.Sprint(*s.LatencyUS)
		}
		fmt.Fprintf(&b, "  %s %s %s size=%d stored=%d copies=%d conc=%d attempt=%d lat=%s status=%s class=%s\n",
			s.Op, s.Variant, s.Content, s.SizeBytes, s.StoredBytes, s.Copies, s.Concurrency, s.Attempt, lat, s.Status, s.ErrorClass)
	}
	return b.String()
}

// running starts a manager on the given targets; stop cancels it and waits for Run.
func running(t *testing.T, log *slog.Logger, targets ...map[string]any) (*collector, *Manager, func()) {
	t.Helper()
	return runningInto(t, newCollector(), log, targets...)
}

// runningInto is running with a collector the test prepared (an onEmit hook).
func runningInto(t *testing.T, col *collector, log *slog.Logger, targets ...map[string]any) (*collector, *Manager, func()) {
	t.Helper()
	m := NewManager(col.emit, log)
	var raws []json.RawMessage
	for _, tg := range targets {
		b, err := json.Marshal(tg)
		if err != nil {
			t.Fatal(err)
		}
		raws = append(raws, b)
	}
	m.Apply(raws)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Run returned %v", err)
				}
			case <-time.After(60 * time.Second):
				t.Error("Run did not return after cancel")
			}
		})
	}
	t.Cleanup(stop)
	return col, m, stop
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(bytes.TrimRight(p, "\n")))
	return len(p), nil
}

func find(ss []sample.Storage, pred func(sample.Storage) bool) []sample.Storage {
	var out []sample.Storage
	for _, s := range ss {
		if pred(s) {
			out = append(out, s)
		}
	}
	return out
}

func okSample(s sample.Storage) bool { return s.Status == sample.StatusOK && s.ErrorClass == "" }

var allProviders = []string{ProviderS3, ProviderAzure, ProviderGCS}

// storeFor opens a fresh client on a target's bucket; it also returns the parsed target.
func storeFor(t *testing.T, target map[string]any) (store, *Target) {
	t.Helper()
	b, _ := json.Marshal(target)
	tg, err := ParseTarget(b)
	if err != nil {
		t.Fatal(err)
	}
	sec, err := tg.Credentials.resolve(tg.Provider)
	if err != nil {
		t.Fatal(err)
	}
	st, err := newStore(context.Background(), tg, sec, newTransport())
	if err != nil {
		t.Fatal(err)
	}
	return st, tg
}

// listed lists the keys under prefix ("" for the whole bucket).
func listed(t *testing.T, st store, prefix string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	keys, err := st.list(ctx, prefix)
	if err != nil {
		t.Fatalf("listing %q: %v", prefix, err)
	}
	slices.Sort(keys)
	return keys
}

// remaining lists the objects left under a target's prefix, through a fresh client.
func remaining(t *testing.T, target map[string]any) []string {
	t.Helper()
	st, tg := storeFor(t, target)
	return listed(t, st, tg.Prefix)
}

func TestACycleRecordsAPutAndAGetOfEverySizeOnEveryProvider(t *testing.T) {
	for _, p := range allProviders {
		t.Run(p, func(t *testing.T) {
			em := need(t, p)
			bucket := bucketName(t)
			createBucket(t, em, bucket)
			target := targetFor(em, bucket, nil)
			col, _, stop := running(t, testLogger(t), target)
			want := map[string][]int64{"binary": {1 << 10, 10 << 10, 100 << 10, 1 << 20}, "text": {1 << 10, 100 << 10}}
			done := func(ss []sample.Storage) bool {
				for content, sizes := range want {
					for _, size := range sizes {
						if len(find(ss, func(s sample.Storage) bool {
							return s.Op == opGet && s.Content == content && s.SizeBytes == size
						})) == 0 {
							return false
						}
					}
				}
				return true
			}
			ss := col.waitFor(t, 60*time.Second, "a GET of every size", done)
			stop()

			rtts := find(ss, func(s sample.Storage) bool { return s.Op == opRTT })
			if len(rtts) != rttProbes {
				t.Fatalf("got %d rtt samples, want %d", len(rtts), rttProbes)
			}
			for _, s := range rtts {
				if !okSample(s) || s.RTTUS == nil || s.LatencyUS == nil || *s.RTTUS != *s.LatencyUS {
					t.Fatalf("bad rtt sample %+v", s)
				}
			}
			for content, sizes := range want {
				for _, size := range sizes {
					for _, op := range []string{opPut, opGet} {
						got := find(ss, func(s sample.Storage) bool {
							return s.Op == op && s.Variant == variantPlain && s.Content == content && s.SizeBytes == size
						})
						if len(got) != 1 {
							t.Fatalf("%s %s %d: %d samples, want 1\n%s", op, content, size, len(got), dump(ss))
						}
						s := got[0]
						if !okSample(s) || s.Attempt != 1 || s.StoredBytes != size || s.Copies != 1 || s.Concurrency != 1 {
							t.Fatalf("%s %s %d: unexpected sample %+v", op, content, size, s)
						}
						if s.LatencyUS == nil || s.TTFBUS == nil || *s.TTFBUS > *s.LatencyUS {
							t.Fatalf("%s %s %d: latency %v ttfb %v", op, content, size, s.LatencyUS, s.TTFBUS)
						}
						if s.RTTUS == nil {
							t.Fatalf("%s %s %d: the cycle's RTT is missing", op, content, size)
						}
						if s.TargetID != target["target_id"] || s.TimeUS <= 0 {
							t.Fatalf("%s %s %d: target %q time %d", op, content, size, s.TargetID, s.TimeUS)
						}
					}
				}
			}
			if left := remaining(t, target); len(left) != 0 {
				t.Fatalf("objects left after the cycle: %v", left)
			}
		})
	}
}

func TestTheVariantsRecordCompressionReplicationConsistencyAndConcurrency(t *testing.T) {
	for _, p := range allProviders {
		t.Run(p, func(t *testing.T) {
			em := need(t, p)
			bucket := bucketName(t)
			createBucket(t, em, bucket)
			levels := []int{1, 2, 4, 8}
			const concSize = 256 << 10
			target := targetFor(em, bucket, map[string]any{
				"contents":    []string{"binary"},
				"sizes_bytes": map[string]any{"binary": []int64{1 << 10}, "text": []int64{1 << 10, 100 << 10}},
				"variants": map[string]any{
					"gzip9":       map[string]any{"enabled": true, "contents": []string{"text", "binary"}},
					"replication": map[string]any{"enabled": true, "copies": 3, "sizes_bytes": []int64{1 << 10, 100 << 10}},
					"consistency": map[string]any{"enabled": true, "size_bytes": 1 << 10, "poll_interval_ms": 5},
					"concurrency": map[string]any{"enabled": true, "levels": levels, "size_bytes": concSize},
				},
			})
			col, _, stop := running(t, testLogger(t), target)
			ss := col.waitFor(t, 60*time.Second, "the concurrency run at the last level", func(ss []sample.Storage) bool {
				return len(find(ss, func(s sample.Storage) bool {
					return s.Variant == variantConcurrent && s.Concurrency == levels[len(levels)-1]
				})) == levels[len(levels)-1]
			})
			stop()
			if bad := find(ss, func(s sample.Storage) bool { return !okSample(s) }); len(bad) > 0 {
				t.Fatalf("failed samples:\n%s", dump(bad))
			}

			t.Run("gzip9 stores text smaller and records both sizes", func(t *testing.T) {
				for _, size := range []int64{1 << 10, 100 << 10} {
					for _, op := range []string{opPut, opGet} {
						got := find(ss, func(s sample.Storage) bool {
							return s.Op == op && s.Variant == variantGzip9 && s.Content == contentText && s.SizeBytes == size
						})
						if len(got) != 1 || got[0].StoredBytes <= 0 || got[0].StoredBytes >= size {
							t.Fatalf("gzip9 %s text %d: %s", op, size, dump(got))
						}
					}
				}
				// Random binary does not compress (seed 000 §3): gzip adds its framing.
				got := find(ss, func(s sample.Storage) bool {
					return s.Op == opPut && s.Variant == variantGzip9 && s.Content == contentBinary
				})
				if len(got) != 1 || got[0].StoredBytes < got[0].SizeBytes {
					t.Fatalf("gzip9 binary: %s", dump(got))
				}
			})

			t.Run("replication with three copies gives each copy and first-of-k", func(t *testing.T) {
				for _, size := range []int64{1 << 10, 100 << 10} {
					puts := find(ss, func(s sample.Storage) bool {
						return s.Op == opPut && s.Variant == variantReplicated && s.SizeBytes == size
					})
					gets := find(ss, func(s sample.Storage) bool {
						return s.Op == opGet && s.Variant == variantReplicated && s.SizeBytes == size
					})
					if len(puts) != 3 || len(gets) != 3 {
						t.Fatalf("size %d: %d puts, %d gets, want 3 and 3", size, len(puts), len(gets))
					}
					minLat := *gets[0].LatencyUS
					for _, g := range gets {
						if g.Copies != 3 {
							t.Fatalf("replicated get copies %d", g.Copies)
						}
						minLat = min(minLat, *g.LatencyUS)
					}
					var prev int64 = -1
					for k := 1; k <= 3; k++ {
						fk := find(ss, func(s sample.Storage) bool {
							return s.Op == opGetFirst && s.SizeBytes == size && s.Copies == k
						})
						if len(fk) != 1 || fk[0].LatencyUS == nil {
							t.Fatalf("size %d: first-of-%d: %s", size, k, dump(fk))
						}
						lat := *fk[0].LatencyUS
						if k == 1 && lat != *gets[0].LatencyUS {
							t.Fatalf("first-of-1 %d is not copy 1's latency %d", lat, *gets[0].LatencyUS)
						}
						if prev >= 0 && lat > prev {
							t.Fatalf("first-of-%d %d exceeds first-of-%d %d", k, lat, k-1, prev)
						}
						prev = lat
					}
					if prev != minLat {
						t.Fatalf("first-of-3 %d is not the fastest copy %d", prev, minLat)
					}
				}
			})

			t.Run("read-after-write and list-after-write give a time to consistency", func(t *testing.T) {
				for _, op := range []string{opReadAfterWrite, opListAfterWrite} {
					got := find(ss, func(s sample.Storage) bool { return s.Op == op })
					if len(got) != 1 || got[0].LatencyUS == nil || *got[0].LatencyUS < 0 {
						t.Fatalf("%s: %s", op, dump(got))
					}
				}
			})

			t.Run("concurrency gives per-op latency and the level's throughput", func(t *testing.T) {
				for _, n := range levels {
					got := find(ss, func(s sample.Storage) bool {
						return s.Op == opGet && s.Variant == variantConcurrent && s.Concurrency == n
					})
					if len(got) != n {
						t.Fatalf("level %d: %d samples", n, len(got))
					}
					for _, s := range got {
						if s.LatencyUS == nil || s.BytesPerS == nil || *s.BytesPerS <= 0 || *s.BytesPerS != *got[0].BytesPerS || s.SizeBytes != concSize {
							t.Fatalf("level %d: %s", n, dump(got))
						}
					}
				}
			})

			if left := remaining(t, target); len(left) != 0 {
				t.Fatalf("objects left after the cycle: %v", left)
			}
		})
	}
}

// failedTwiceEverySize checks seed 000's rule within the first cycle of a target: every
// size's PUT fails twice with class, and its GET is abandoned.
func failedTwiceEverySize(t *testing.T, ss []sample.Storage, sizes []int64, class string) {
	t.Helper()
	if gets := find(ss, func(s sample.Storage) bool { return s.Op == opGet }); len(gets) > 0 {
		t.Fatalf("a GET was tried after two failed PUTs:\n%s", dump(gets))
	}
	for _, size := range sizes {
		puts := find(ss, func(s sample.Storage) bool { return s.Op == opPut && s.SizeBytes == size })
		if len(puts) < 2 {
			t.Fatalf("size %d: %d PUT samples, want 2 per cycle\n%s", size, len(puts), dump(ss))
		}
		for i, s := range puts[:2] {
			if s.Attempt != i+1 || s.Status == sample.StatusOK || s.ErrorClass != class || s.LatencyUS != nil {
				t.Fatalf("size %d attempt %d: want a failure of class %s, got\n%s", size, i+1, class, dump(puts))
			}
		}
	}
}

// cyclesSeen counts failed attempt-1 PUTs of the smallest size: one per cycle.
func cyclesSeen(ss []sample.Storage, size int64) int {
	return len(find(ss, func(s sample.Storage) bool { return s.Op == opPut && s.SizeBytes == size && s.Attempt == 1 }))
}

var failureSizes = []int64{1 << 10, 10 << 10}

func failureTarget(em *emulator, bucket string, over map[string]any) map[string]any {
	base := map[string]any{
		"interval_s":    1,
		"op_timeout_ms": 400,
		"contents":      []string{"binary"},
		"sizes_bytes":   map[string]any{"binary": failureSizes},
	}
	for k, v := range over {
		base[k] = v
	}
	return targetFor(em, bucket, base)
}

func TestAMissingBucketFailsWithNotFoundTwicePerSizeAndTheProbeRecoversOnceItExists(t *testing.T) {
	for _, p := range allProviders {
		t.Run(p, func(t *testing.T) {
			em := need(t, p)
			bucket := bucketName(t)
			col, _, _ := running(t, testLogger(t), failureTarget(em, bucket, map[string]any{"op_timeout_ms": 5000}))
			ss := col.waitFor(t, 30*time.Second, "two failed PUTs of every size", func(ss []sample.Storage) bool {
				return len(find(ss, func(s sample.Storage) bool { return s.Op == opPut && s.SizeBytes == failureSizes[1] && s.Attempt == 2 })) > 0
			})
			failedTwiceEverySize(t, ss, failureSizes, classNotFound)
			createBucket(t, em, bucket)
			col.waitFor(t, 30*time.Second, "a later cycle's successful GETs", func(ss []sample.Storage) bool {
				for _, size := range failureSizes {
					if len(find(ss, func(s sample.Storage) bool { return s.Op == opGet && s.SizeBytes == size && okSample(s) })) == 0 {
						return false
					}
				}
				return true
			})
		})
	}
}

func TestWrongCredentialsFailWithAuthTwicePerSizeCycleAfterCycle(t *testing.T) {
	t.Setenv("SW_TEST_MISSING_GCS_KEY", "")
	cases := []struct {
		provider string
		creds    map[string]any
	}{
		{ProviderS3, map[string]any{"source": "inline", "access_key_id": "AKIAWRONGWRONGWRONG1", "secret_access_key": "wrong"}},
		{ProviderS3, nil}, // the right key id with a wrong secret: filled below
		{ProviderAzure, map[string]any{"source": "inline", "account_name": azuriteAccount, "account_key": "d3Jvbmcgd3Jvbmcgd3Jvbmcgd3Jvbmcgd3Jvbmcgd3Jvbmc="}},
		// fake-gcs-server checks no credentials, so GCS's case is a reference this host cannot resolve.
		{ProviderGCS, map[string]any{"source": "env", "service_account_json_var": "SW_TEST_MISSING_GCS_KEY"}},
	}
	for i, tc := range cases {
		t.Run(fmt.Sprintf("%s-%d", tc.provider, i), func(t *testing.T) {
			em := need(t, tc.provider)
			bucket := bucketName(t)
			createBucket(t, em, bucket)
			creds := tc.creds
			if creds == nil {
				creds = map[string]any{"source": "inline", "access_key_id": em.accessKeyID, "secret_access_key": "not-the-secret"}
			}
			col, _, _ := running(t, testLogger(t), failureTarget(em, bucket, map[string]any{"credentials": creds, "op_timeout_ms": 5000}))
			ss := col.waitFor(t, 30*time.Second, "two cycles", func(ss []sample.Storage) bool { return cyclesSeen(ss, failureSizes[0]) >= 2 })
			if tc.provider == ProviderGCS {
				// Unresolvable credentials: one auth failure per size and cycle, nothing sent.
				for _, s := range find(ss, func(s sample.Storage) bool { return s.Op == opPut }) {
					if s.ErrorClass != classAuth || s.Status == sample.StatusOK {
						t.Fatalf("want auth failures, got\n%s", dump(ss))
					}
				}
				return
			}
			failedTwiceEverySize(t, ss, failureSizes, classAuth)
		})
	}
}

func TestAStallingEndpointTimesOutAndADroppingOneFailsWithNetworkWhileTheManagerKeepsRunning(t *testing.T) {
	paths := map[string]string{ProviderS3: "", ProviderAzure: "/" + azuriteAccount, ProviderGCS: ""}
	for _, mode := range []struct{ mode, class string }{{"stall", classTimeout}, {"drop", classNetwork}} {
		for _, p := range allProviders {
			t.Run(mode.mode+"-"+p, func(t *testing.T) {
				em := &emulator{provider: p, accessKeyID: "AKIAEXAMPLE", secretKey: "example"}
				if p == ProviderS3 && emulators[p] != nil && emulators[p].accessKeyID != "" {
					em.accessKeyID, em.secretKey = emulators[p].accessKeyID, emulators[p].secretKey
				}
				fe := startFaultyEndpoint(t, mode.mode)
				em.endpoint = fe.url() + paths[p]
				col, _, stop := running(t, testLogger(t), failureTarget(em, "bucket-"+p, nil))
				ss := col.waitFor(t, 30*time.Second, "two cycles", func(ss []sample.Storage) bool { return cyclesSeen(ss, failureSizes[0]) >= 2 })
				stop()
				failedTwiceEverySize(t, ss, failureSizes, mode.class)
				for _, s := range find(ss, func(s sample.Storage) bool { return s.Op == opRTT }) {
					// A dropping endpoint resets even the bare connects; a stalling one accepts them.
					if mode.mode == "stall" && !okSample(s) {
						t.Fatalf("the endpoint accepts connections, yet an RTT probe failed: %+v", s)
					}
				}
			})
		}
	}
}

func TestInlineSecretsNeverReachTheLog(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	const secret = "s3cr3t-value-that-must-not-leak"
	fe := startFaultyEndpoint(t, "drop")
	good := map[string]any{
		"target_id": "t-secret", "provider": "s3", "endpoint": fe.url(), "bucket": "b", "path_style": true,
		"interval_s": 3600, "op_timeout_ms": 300, "contents": []string{"binary"},
		"sizes_bytes": map[string]any{"binary": []int64{1024}},
		"credentials": map[string]any{"source": "inline", "access_key_id": "AKIAX", "secret_access_key": secret},
	}
	bad := map[string]any{"target_id": "t-bad", "provider": "nope", "bucket": "b",
		"credentials": map[string]any{"source": "inline", "account_key": secret}}
	// Azure SAS tokens travel in URLs, which network errors quote.
	const sig = "c2lnbmF0dXJlLXRoYXQtbXVzdC1ub3QtbGVhaw"
	sasTarget := map[string]any{
		"target_id": "t-sas", "provider": "azure", "endpoint": fe.url() + "/acct", "bucket": "c",
		"interval_s": 3600, "op_timeout_ms": 300, "contents": []string{"binary"},
		"sizes_bytes": map[string]any{"binary": []int64{1024}},
		"credentials": map[string]any{"source": "inline", "account_name": "acct", "sas_token": "sv=2021-08-06&ss=b&sig=" + sig},
	}
	col, _, stop := running(t, log, good, bad, sasTarget)
	col.waitFor(t, 20*time.Second, "the failed PUTs", func(ss []sample.Storage) bool {
		return len(find(ss, func(s sample.Storage) bool { return s.Op == opPut && s.Attempt == 2 })) == 2
	})
	stop()
	if bytes.Contains(buf.Bytes(), []byte(secret)) || bytes.Contains(buf.Bytes(), []byte(sig)) {
		t.Fatalf("a secret reached the log:\n%s", buf.String())
	}
	if !bytes.Contains(buf.Bytes(), []byte("t-sas")) || !bytes.Contains(buf.Bytes(), []byte("redacted")) {
		t.Fatalf("the SAS target's failures were not logged (redacted):\n%s", buf.String())
	}
	if !bytes.Contains(buf.Bytes(), []byte("t-bad")) {
		t.Fatalf("the invalid target was not reported:\n%s", buf.String())
	}
	if s := fmt.Sprintf("%v %+v %s", Secret{SecretAccessKey: secret}, Credentials{Source: "inline", Secret: Secret{AccountKey: secret}}, Credentials{Source: "inline"}); bytes.Contains([]byte(s), []byte(secret)) {
		t.Fatalf("a secret prints its content: %s", s)
	}
}

func TestParseTargetAppliesSeed000DefaultsAndRejectsBadEntries(t *testing.T) {
	def, err := ParseTarget([]byte(`{"target_id":"x","provider":"s3","bucket":"b","credentials":{"source":"env"},"variants":{"replication":{"enabled":true},"concurrency":{"enabled":true},"gzip9":{"enabled":true}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if def.IntervalS != 600 || def.Region != "us-east-1" || def.Prefix != "stormwatch-probe/x/" ||
		!slices.Equal(def.Sizes.Binary, defaultBinarySizes) || !slices.Equal(def.Sizes.Text, defaultTextSizes) ||
		def.Variants.Replication.Copies != 3 || !slices.Equal(def.Variants.Concurrency.Levels, []int{1, 2, 4, 8, 16, 32}) ||
		def.Variants.Concurrency.SizeBytes != 10<<20 || !slices.Equal(def.Variants.Gzip9.Contents, []string{"text"}) {
		t.Fatalf("defaults not applied: %+v", def)
	}
	for _, tc := range []struct{ name, json string }{
		{"no target id", `{"provider":"s3","bucket":"b","credentials":{"source":"none"}}`},
		{"unknown provider", `{"target_id":"x","provider":"dropbox","bucket":"b","credentials":{"source":"none"}}`},
		{"no bucket", `{"target_id":"x","provider":"gcs","credentials":{"source":"none"}}`},
		{"no credentials", `{"target_id":"x","provider":"gcs","bucket":"b"}`},
		{"file without path", `{"target_id":"x","provider":"gcs","bucket":"b","credentials":{"source":"file"}}`},
		{"unknown field", `{"target_id":"x","provider":"gcs","bucket":"b","credentials":{"source":"none"},"colour":"red"}`},
		{"endpoint not http", `{"target_id":"x","provider":"s3","bucket":"b","endpoint":"ftp://h","credentials":{"source":"none"}}`},
		{"size zero", `{"target_id":"x","provider":"s3","bucket":"b","sizes_bytes":{"binary":[0]},"credentials":{"source":"none"}}`},
		{"bad content", `{"target_id":"x","provider":"s3","bucket":"b","contents":["video"],"credentials":{"source":"none"}}`},
		{"bad level", `{"target_id":"x","provider":"s3","bucket":"b","variants":{"concurrency":{"enabled":true,"levels":[0]}},"credentials":{"source":"none"}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := ParseTarget([]byte(tc.json)); err == nil {
				t.Fatalf("accepted %s", tc.json)
			}
		})
	}
}

func TestCredentialReferencesResolveFromEnvironmentFileAndInline(t *testing.T) {
	dir := t.TempDir()
	s3File := dir + "/s3.json"
	gcsFile := dir + "/sa.json"
	writeFile(t, s3File, `{"access_key_id":"AKIAFILE","secret_access_key":"file-secret"}`)
	writeFile(t, gcsFile, `{"type":"service_account","client_email":"a@b"}`)
	t.Setenv("SW_AK", "AKIAENV")
	t.Setenv("SW_SK", "env-secret")
	t.Setenv("AZURE_STORAGE_ACCOUNT", "acct")
	t.Setenv("AZURE_STORAGE_KEY", "a2V5")
	for _, tc := range []struct {
		name     string
		provider string
		creds    Credentials
		want     Secret
		fails    bool
	}{
		{"s3 env named vars", ProviderS3, Credentials{Source: "env", AccessKeyIDVar: "SW_AK", SecretAccessKeyVar: "SW_SK"}, Secret{AccessKeyID: "AKIAENV", SecretAccessKey: "env-secret"}, false},
		{"s3 env missing var", ProviderS3, Credentials{Source: "env", AccessKeyIDVar: "SW_NOPE", SecretAccessKeyVar: "SW_SK"}, Secret{}, true},
		{"azure env default names", ProviderAzure, Credentials{Source: "env"}, Secret{AccountName: "acct", AccountKey: "a2V5"}, false},
		{"s3 file", ProviderS3, Credentials{Source: "file", Path: s3File}, Secret{AccessKeyID: "AKIAFILE", SecretAccessKey: "file-secret"}, false},
		{"gcs key file as it is", ProviderGCS, Credentials{Source: "file", Path: gcsFile}, Secret{ServiceAccountJSON: `{"type":"service_account","client_email":"a@b"}`}, false},
		{"missing file", ProviderS3, Credentials{Source: "file", Path: dir + "/none.json"}, Secret{}, true},
		{"inline", ProviderAzure, Credentials{Source: "inline", Secret: Secret{AccountName: "a", SASToken: "sv=1"}}, Secret{AccountName: "a", SASToken: "sv=1"}, false},
		{"none", ProviderGCS, Credentials{Source: "none"}, Secret{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.creds.resolve(tc.provider)
			if (err != nil) != tc.fails {
				t.Fatalf("err = %v, want failure %v", err, tc.fails)
			}
			if err == nil && got != tc.want {
				t.Fatalf("resolved the wrong secret")
			}
		})
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestErrorClassesFollowHTTPStatuses(t *testing.T) {
	for _, tc := range []struct {
		code  int
		class string
	}{
		{http.StatusForbidden, classAuth}, {http.StatusUnauthorized, classAuth}, {http.StatusNotFound, classNotFound},
		{http.StatusTooManyRequests, classThrottled}, {http.StatusServiceUnavailable, classThrottled},
		{http.StatusInternalServerError, classServerError}, {http.StatusBadRequest, classServerError},
	} {
		_, class := classify(context.Background(), func(error) int { return tc.code }, fmt.Errorf("status %d", tc.code))
		if class != tc.class {
			t.Errorf("%d: class %s, want %s", tc.code, class, tc.class)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Nanosecond)
	defer cancel()
	<-ctx.Done()
	if st, class := classify(ctx, func(error) int { return 0 }, ctx.Err()); class != classTimeout || st != sample.StatusTimeout {
		t.Errorf("deadline: %s %s", st, class)
	}
}

func TestAnAzureSASTokenFromTheEnvironmentIsEnough(t *testing.T) {
	em := need(t, ProviderAzure)
	bucket := bucketName(t)
	createBucket(t, em, bucket)
	cred, err := azblob.NewSharedKeyCredential(azuriteAccount, azuriteKey)
	if err != nil {
		t.Fatal(err)
	}
	perms := sas.AccountPermissions{Read: true, Write: true, Delete: true, List: true, Create: true, Add: true}
	types := sas.AccountResourceTypes{Container: true, Object: true}
	qp, err := sas.AccountSignatureValues{
		Protocol: sas.ProtocolHTTPSandHTTP, ExpiryTime: time.Now().Add(time.Hour).UTC(),
		Permissions: perms.String(), ResourceTypes: types.String(),
	}.SignWithSharedKey(cred)
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("SW_TEST_AZ_ACCOUNT", azuriteAccount)
	t.Setenv("SW_TEST_AZ_SAS", qp.Encode())
	target := targetFor(em, bucket, map[string]any{
		"contents": []string{"binary"}, "sizes_bytes": map[string]any{"binary": []int64{1024, 10240}},
		"credentials": map[string]any{"source": "env", "account_name_var": "SW_TEST_AZ_ACCOUNT", "sas_token_var": "SW_TEST_AZ_SAS"},
	})
	col, _, stop := running(t, testLogger(t), target)
	ss := col.waitFor(t, 30*time.Second, "GETs of both sizes", func(ss []sample.Storage) bool {
		return len(find(ss, func(s sample.Storage) bool { return s.Op == opGet })) == 2
	})
	stop()
	if bad := find(ss, func(s sample.Storage) bool { return !okSample(s) }); len(bad) > 0 {
		t.Fatalf("failed samples:\n%s", dump(bad))
	}
}

func TestADistantEndpointsDelayIsInsideEveryLatencyButNotInTheRTT(t *testing.T) {
	const delay = 120 * time.Millisecond
	for _, p := range allProviders {
		t.Run(p, func(t *testing.T) {
			em := need(t, p)
			bucket := bucketName(t)
			createBucket(t, em, bucket)
			u, err := url.Parse(em.endpoint)
			if err != nil {
				t.Fatal(err)
			}
			proxy := startDelayingProxy(t, u.Host, delay)
			via := *em
			via.endpoint = proxy.url() + u.Path
			target := targetFor(&via, bucket, map[string]any{
				"contents": []string{"binary"}, "sizes_bytes": map[string]any{"binary": []int64{1024, 100 << 10}},
			})
			col, _, stop := running(t, testLogger(t), target)
			ss := col.waitFor(t, 30*time.Second, "GETs of both sizes", func(ss []sample.Storage) bool {
				return len(find(ss, func(s sample.Storage) bool { return s.Op == opGet })) == 2
			})
			stop()
			for _, s := range ss {
				if !okSample(s) {
					t.Fatalf("failed sample %+v", s)
				}
				if s.Op == opRTT {
					// The proxy accepts at once: connect time is loopback's, below the delay.
					if *s.LatencyUS >= delay.Microseconds() {
						t.Fatalf("rtt %d µs includes the response delay", *s.LatencyUS)
					}
					continue
				}
				if *s.LatencyUS < delay.Microseconds() || s.TTFBUS == nil || *s.TTFBUS < delay.Microseconds() {
					t.Fatalf("%s %d: latency %d µs, ttfb %v, want both ≥ %d µs", s.Op, s.SizeBytes, *s.LatencyUS, s.TTFBUS, delay.Microseconds())
				}
			}
		})
	}
}
