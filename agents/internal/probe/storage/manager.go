package storage

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"time"

	"stormwatch/agents/internal/sample"
)

// Manager runs the cycles of every storage target the server config names.
type Manager struct {
	log    *slog.Logger
	emitMu sync.Mutex
	emitFn func(sample.Storage)

	mu      sync.Mutex
	desired map[string]desiredTarget
	running map[string]*task
	root    context.Context // set by Run
	wg      sync.WaitGroup
}

type desiredTarget struct {
	raw []byte
	t   *Target
}

type task struct {
	raw    []byte
	cancel context.CancelFunc
	done   chan struct{}
}

// NewManager returns a manager that hands every sample to emit.
func NewManager(emit func(sample.Storage), logger *slog.Logger) *Manager {
	if logger == nil {
		logger = slog.Default()
	}
	return &Manager{
		log:     logger.With("probe", "storage"),
		emitFn:  emit,
		desired: map[string]desiredTarget{},
		running: map[string]*task{},
	}
}

// emit serialises samples: replication and concurrency runs record from several goroutines.
func (m *Manager) emit(s sample.Storage) {
	m.emitMu.Lock()
	defer m.emitMu.Unlock()
	m.emitFn(s)
}

// Apply replaces the set of targets with the config's storage.targets entries. Unchanged
// targets keep running undisturbed; changed ones restart; invalid ones are logged and skipped.
func (m *Manager) Apply(targets []json.RawMessage) {
	desired := map[string]desiredTarget{}
	for i, raw := range targets {
		t, err := ParseTarget(raw)
		if err != nil {
			m.log.Error("ignoring storage target", "index", i, "err", redact(err))
			continue
		}
		if _, dup := desired[t.TargetID]; dup {
			m.log.Error("ignoring duplicate storage target", "index", i, "target_id", t.TargetID)
			continue
		}
		desired[t.TargetID] = desiredTarget{raw: compact(raw), t: t}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.desired = desired
	if m.root != nil {
		m.reconcile()
	}
}

func compact(raw []byte) []byte {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return raw
	}
	return b.Bytes()
}

// reconcile starts, restarts and stops target tasks; m.mu is held.
func (m *Manager) reconcile() {
	stopping := map[string]chan struct{}{}
	for id, tk := range m.running {
		d, ok := m.desired[id]
		if !ok || !bytes.Equal(d.raw, tk.raw) {
			tk.cancel()
			delete(m.running, id)
			stopping[id] = tk.done
		}
	}
	if m.root.Err() != nil {
		return
	}
	for id, d := range m.desired {
		if _, ok := m.running[id]; ok {
			continue
		}
		ctx, cancel := context.WithCancel(m.root)
		tk := &task{raw: d.raw, cancel: cancel, done: make(chan struct{})}
		m.running[id] = tk
		m.wg.Add(1)
		go func(t *Target, prev chan struct{}) {
			defer m.wg.Done()
			defer close(tk.done)
			// A restarted target waits for its old run's clean-up, which sweeps the same prefix.
			if prev != nil {
				select {
				case <-prev:
				case <-ctx.Done():
					return
				}
			}
			m.runTarget(ctx, t)
		}(d.t, stopping[id])
	}
}

// Run runs all targets' cycles until ctx is done, then waits for them to clean up.
func (m *Manager) Run(ctx context.Context) error {
	m.mu.Lock()
	if m.root != nil {
		m.mu.Unlock()
		return errors.New("storage manager: Run called twice")
	}
	m.root = ctx
	m.reconcile()
	m.mu.Unlock()

	<-ctx.Done()
	m.mu.Lock()
	for id, tk := range m.running {
		tk.cancel()
		delete(m.running, id)
	}
	m.mu.Unlock()
	m.wg.Wait()
	return nil
}

// runTarget runs one target's cycles every interval; a cycle that overruns the interval
// is followed at once by the next, never overlapped.
func (m *Manager) runTarget(ctx context.Context, t *Target) {
	log := m.log.With("target_id", t.TargetID, "provider", t.Provider, "bucket", t.Bucket)
	log.Info("storage target started", "interval_s", t.IntervalS, "credentials", t.Credentials.String())
	r := newRunner(t, m.emit, log)
	defer r.close()
	for {
		began := time.Now()
		func() {
			// A panic in one SDK must not take the agent down with it.
			defer func() {
				if p := recover(); p != nil {
					log.Error("storage cycle panicked", "panic", p)
				}
			}()
			r.runCycle(ctx)
		}()
		if !sleep(ctx, time.Until(began.Add(t.interval()))) {
			log.Info("storage target stopped")
			return
		}
	}
}
