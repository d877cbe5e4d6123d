package storage

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"stormwatch/agents/internal/sample"
)

// crashChildEnv carries the target JSON to a copy of this test binary that runs it as the
// agent would and is killed mid-cycle.
const crashChildEnv = "STORMWATCH_STORAGE_CRASH_CHILD"

// crashChild runs one target until its second cycle has written and read every size, then
// SIGKILLs its own process from inside the cycle: no clean-up, no shutdown, as in a crash.
func crashChild() {
	raw := json.RawMessage(os.Getenv(crashChildEnv))
	t, err := ParseTarget(raw)
	if err != nil || len(t.Sizes.Binary) == 0 {
		fmt.Fprintln(os.Stderr, "crash child: bad target:", err)
		os.Exit(2)
	}
	last := t.Sizes.Binary[len(t.Sizes.Binary)-1]
	gets := 0
	enc := json.NewEncoder(os.Stdout)
	m := NewManager(func(s sample.Storage) {
		_ = enc.Encode(s)
		if s.Op != opGet || s.SizeBytes != last || s.Status != sample.StatusOK {
			return
		}
		if gets++; gets == 2 {
			p, _ := os.FindProcess(os.Getpid())
			_ = p.Kill()
			time.Sleep(time.Hour) // the kill lands before the cycle can go on to its clean-up
		}
	}, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	m.Apply([]json.RawMessage{raw})
	_ = m.Run(context.Background())
	os.Exit(3)
}

func TestACrashLeavesOneCyclesObjectsWhichTheNextStartRemovesWithoutTouchingOtherPrefixes(t *testing.T) {
	for _, p := range allProviders {
		t.Run(p, func(t *testing.T) {
			em := need(t, p)
			bucket := bucketName(t)
			createBucket(t, em, bucket)
			sizes := []int64{1 << 10, 10 << 10}
			target := targetFor(em, bucket, map[string]any{
				"interval_s": 1, "contents": []string{"binary"}, "sizes_bytes": map[string]any{"binary": sizes},
			})
			st, tg := storeFor(t, target)

			// An agent process runs two cycles and dies by SIGKILL in the middle of the second.
			raw, err := json.Marshal(target)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			child := exec.CommandContext(ctx, os.Args[0])
			child.Env = append(os.Environ(), crashChildEnv+"="+string(raw))
			var stdout, stderr bytes.Buffer
			child.Stdout, child.Stderr = &stdout, &stderr
			err = child.Run()
			var exit *exec.ExitError
			if ctx.Err() != nil || !errors.As(err, &exit) {
				t.Fatalf("the agent process did not crash: %v (context %v)\nstderr:\n%s\nsamples:\n%s", err, ctx.Err(), stderr.String(), stdout.String())
			}
			if ws, ok := exit.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
				t.Fatalf("the agent process ended with %v, not SIGKILL\nstderr:\n%s", err, stderr.String())
			}

			// At most one cycle's objects are left: all of the second cycle, none of the first.
			leftovers := listed(t, st, tg.Prefix)
			if len(leftovers) != len(sizes) {
				t.Fatalf("after the crash %d objects are left under %s, want the %d of the killed cycle: %v", len(leftovers), tg.Prefix, len(sizes), leftovers)
			}
			for _, k := range leftovers {
				dir, _, _ := strings.Cut(strings.TrimPrefix(k, tg.Prefix), "/")
				if !strings.HasSuffix(dir, "-2") {
					t.Fatalf("a leftover %s is not from the killed second cycle: %v", k, leftovers)
				}
			}

			// What an older crashed run left, and objects of others that must survive.
			put := func(key string) {
				pctx, pcancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer pcancel()
				if err := st.put(pctx, key, []byte("not the probe's")); err != nil {
					t.Fatalf("seeding %s: %v", key, err)
				}
			}
			olderRun := tg.Prefix + "0badc0de-7/plain-text-1024"
			put(olderRun)
			leftovers = append(leftovers, olderRun)
			others := []string{
				strings.TrimSuffix(tg.Prefix, "/") + "0/plain-binary-1024", // probe/agent-10/: the prefix's name is a prefix of it
				"probe/kept-by-someone-else",
				"kept-at-the-root",
			}
			for _, k := range others {
				put(k)
			}

			// The restarted agent: the store as its first PUT left it must hold no leftover.
			var once sync.Once
			var atFirstPut []string
			var listErr error
			col := newCollector()
			col.onEmit = func(s sample.Storage) {
				if s.Op != opPut {
					return
				}
				once.Do(func() {
					lctx, lcancel := context.WithTimeout(context.Background(), 20*time.Second)
					defer lcancel()
					atFirstPut, listErr = st.list(lctx, tg.Prefix)
				})
			}
			restarted := targetFor(em, bucket, map[string]any{"contents": []string{"binary"}, "sizes_bytes": map[string]any{"binary": sizes}})
			_, _, stop := runningInto(t, col, testLogger(t), restarted)
			ss := col.waitFor(t, 30*time.Second, "the first cycle's GETs", func(ss []sample.Storage) bool {
				return len(find(ss, func(s sample.Storage) bool { return s.Op == opGet })) == len(sizes)
			})
			stop()
			if bad := find(ss, func(s sample.Storage) bool { return !okSample(s) }); len(bad) > 0 {
				t.Fatalf("failed samples:\n%s", dump(bad))
			}
			if listErr != nil {
				t.Fatalf("listing at the first PUT: %v", listErr)
			}
			for _, k := range leftovers {
				if slices.Contains(atFirstPut, k) {
					t.Fatalf("the crashed run's %s was still there when measuring began: %v", k, atFirstPut)
				}
			}
			if len(atFirstPut) != 1 {
				t.Fatalf("at the first PUT the prefix held %v, want only that PUT's object", atFirstPut)
			}
			if left := listed(t, st, tg.Prefix); len(left) != 0 {
				t.Fatalf("objects left under the prefix after the cycle: %v", left)
			}
			slices.Sort(others)
			if all := listed(t, st, ""); !slices.Equal(all, others) {
				t.Fatalf("the bucket holds %v, want exactly the objects outside the prefix %v", all, others)
			}
		})
	}
}

func TestAGetFailingTwiceAfterAGoodPutAbandonsThatSizeAndTheNextSizeIsMeasured(t *testing.T) {
	const failing = 10 << 10
	sizes := []int64{1 << 10, failing, 100 << 10}
	for _, mode := range []struct{ mode, class string }{{"reset", classNetwork}, {"503", classThrottled}} {
		for _, p := range allProviders {
			t.Run(mode.mode+"-"+p, func(t *testing.T) {
				em := need(t, p)
				bucket := bucketName(t)
				createBucket(t, em, bucket)
				u, err := url.Parse(em.endpoint)
				if err != nil {
					t.Fatal(err)
				}
				proxy := startFailingGetsProxy(t, u, fmt.Sprintf("/plain-binary-%d", failing), mode.mode)
				via := *em
				via.endpoint = proxy.srv.URL + u.Path
				target := targetFor(&via, bucket, map[string]any{"contents": []string{"binary"}, "sizes_bytes": map[string]any{"binary": sizes}})
				col, _, stop := running(t, testLogger(t), target)
				ss := col.waitFor(t, 30*time.Second, "the last size's GET", func(ss []sample.Storage) bool {
					return len(find(ss, func(s sample.Storage) bool { return s.Op == opGet && s.SizeBytes == sizes[2] })) > 0
				})
				stop()

				puts := find(ss, func(s sample.Storage) bool { return s.Op == opPut && s.SizeBytes == failing })
				if len(puts) != 1 || !okSample(puts[0]) || puts[0].Attempt != 1 {
					t.Fatalf("the PUT of %d B should succeed at once:\n%s", failing, dump(ss))
				}
				gets := find(ss, func(s sample.Storage) bool { return s.Op == opGet && s.SizeBytes == failing })
				if len(gets) != 2 {
					t.Fatalf("%d GETs of %d B, want the attempt and its one retry:\n%s", len(gets), failing, dump(ss))
				}
				for i, s := range gets {
					if s.Attempt != i+1 || s.Status == sample.StatusOK || s.ErrorClass != mode.class || s.LatencyUS != nil {
						t.Fatalf("GET attempt %d of %d B: want a %s failure, got\n%s", i+1, failing, mode.class, dump(gets))
					}
				}
				if n := proxy.fails.Load(); n < 2 {
					t.Fatalf("the proxy failed %d GETs, want at least 2", n)
				}
				// The sizes around the failing one are measured, the next one after the retry.
				for _, size := range []int64{sizes[0], sizes[2]} {
					for _, op := range []string{opPut, opGet} {
						got := find(ss, func(s sample.Storage) bool { return s.Op == op && s.SizeBytes == size })
						if len(got) != 1 || !okSample(got[0]) {
							t.Fatalf("%s of %d B: want one good sample, got\n%s", op, size, dump(got))
						}
					}
				}
				order := slices.IndexFunc(ss, func(s sample.Storage) bool { return s.Op == opGet && s.SizeBytes == failing && s.Attempt == 2 })
				next := slices.IndexFunc(ss, func(s sample.Storage) bool { return s.Op == opPut && s.SizeBytes == sizes[2] })
				if order > next {
					t.Fatalf("the next size was written before the failing size's retry:\n%s", dump(ss))
				}
				if left := remaining(t, targetFor(em, bucket, nil)); len(left) != 0 {
					t.Fatalf("objects left after the cycle, the unreadable one included: %v", left)
				}
			})
		}
	}
}

// An Azure target without an endpoint names its host through the account; the RTT probes
// of the first cycle must go to it. The account does not exist, so the connects (and the
// PUTs) fail quickly with a DNS answer; what matters is that they are tried and recorded.
func TestAnAzureTargetWithoutAnEndpointMeasuresTheRTTFromItsFirstCycle(t *testing.T) {
	target := map[string]any{
		"target_id": "t-azure-public", "provider": "azure", "bucket": "c",
		"interval_s": 3600, "op_timeout_ms": 2000, "contents": []string{"binary"},
		"sizes_bytes": map[string]any{"binary": []int64{1024}},
		"credentials": map[string]any{"source": "inline", "account_name": "swnoaccount7rtt0probe", "account_key": "a2V5"},
	}
	col, _, stop := running(t, testLogger(t), target)
	ss := col.waitFor(t, 30*time.Second, "the PUT's second attempt", func(ss []sample.Storage) bool {
		return len(find(ss, func(s sample.Storage) bool { return s.Op == opPut && s.Attempt == 2 })) > 0
	})
	stop()
	rtts := find(ss, func(s sample.Storage) bool { return s.Op == opRTT })
	if len(rtts) != rttProbes {
		t.Fatalf("the first cycle recorded %d RTT probes, want %d:\n%s", len(rtts), rttProbes, dump(ss))
	}
	if i := slices.IndexFunc(ss, func(s sample.Storage) bool { return s.Op == opPut }); i < rttProbes {
		t.Fatalf("the RTT probes did not open the cycle:\n%s", dump(ss))
	}
}
