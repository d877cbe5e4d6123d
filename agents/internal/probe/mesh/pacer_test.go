package mesh

import (
	"testing"
	"time"
)

// plannedRounds plans n rounds of the links with the given number of send instants and
// returns, per round, each link's send offset from the round start and the send order.
func plannedRounds(t *testing.T, ls []*link, slots, n int) ([]map[*link]time.Duration, [][]*link) {
	t.Helper()
	p := NewProber("self", NewRecorder(), quietLogger())
	p.next = &plan{links: ls}
	clock := &roundClock{epoch: time.Now(), period: 10 * time.Millisecond, firstRound: 1}
	pc := &pacer{p: p, clock: clock, timeout: time.Second, slots: slots}
	var offs []map[*link]time.Duration
	var orders [][]*link
	for range n {
		pc.planRound(clock.epoch)
		m := map[*link]time.Duration{}
		for i, l := range pc.order {
			m[l] = pc.at[i].Sub(clock.start(pc.round))
			if i > 0 && pc.at[i].Before(pc.at[i-1]) {
				t.Fatalf("round %d: sends out of time order", pc.round)
			}
		}
		if len(m) != len(ls) {
			t.Fatalf("round %d plans %d of %d links", pc.round, len(m), len(ls))
		}
		offs = append(offs, m)
		orders = append(orders, append([]*link(nil), pc.order...))
	}
	return offs, orders
}

func TestWithinASendInstantTheFarthestPeersGoFirstAndTheSelfLoopLast(t *testing.T) {
	ls := make([]*link, 5)
	for i := range ls {
		ls[i] = &link{}
	}
	ls[0].rtt.Store(int64(30 * time.Microsecond)) // the self-loop
	ls[1].rtt.Store(int64(80 * time.Millisecond))
	ls[2].rtt.Store(int64(400 * time.Microsecond))
	ls[4].rtt.Store(int64(2 * time.Millisecond)) // ls[3] has no RTT yet
	want := []*link{ls[3], ls[1], ls[4], ls[2], ls[0]}
	_, orders := plannedRounds(t, ls, 1, 20)
	for r, got := range orders {
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("round %d: position %d holds the wrong link", r, i)
			}
		}
	}
}

func TestAPeersSendTimeIsUniformOverTheRoundAndChangesEveryRound(t *testing.T) {
	ls := make([]*link, 8)
	for i := range ls {
		ls[i] = &link{}
	}
	const rounds = 4000
	for _, slots := range []int{1, DefaultSlots} {
		offs, _ := plannedRounds(t, ls, slots, rounds)
		for _, l := range ls {
			var quarters [4]int
			same := 0
			for r, m := range offs {
				quarters[m[l]*4/(10*time.Millisecond)]++
				if r > 0 && m[l] == offs[r-1][l] {
					same++
				}
			}
			for q, n := range quarters {
				if n < rounds/4*85/100 || n > rounds/4*115/100 {
					t.Fatalf("%d instants: a peer was sent in quarter %d of the round %d times in %d rounds, want about %d",
						slots, q, n, rounds, rounds/4)
				}
			}
			if same > rounds/100 {
				t.Fatalf("%d instants: a peer kept its send time from one round to the next %d times", slots, same)
			}
		}
		// The instants are shared: with fewer instants than peers, some peers go together.
		distinct := map[time.Duration]bool{}
		for _, l := range ls {
			distinct[offs[0][l]] = true
		}
		if len(distinct) > slots {
			t.Fatalf("%d instants per round, but %d distinct send times", slots, len(distinct))
		}
	}
}
