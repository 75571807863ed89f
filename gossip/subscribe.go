package gossip

import "sync"

// subscriber queues events for one Subscribe caller. memberlist calls the
// pool with its own lock held, so events are queued without bound rather
// than sent on a channel that a slow reader could block; a reader that
// never reads should cancel.
type subscriber struct {
	mu      sync.Mutex
	pending []Event
	wake    chan struct{}
	done    chan struct{}
	once    sync.Once
}

func (s *subscriber) push(ev Event) {
	s.mu.Lock()
	s.pending = append(s.pending, ev)
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *subscriber) stop() { s.once.Do(func() { close(s.done) }) }

// pump hands queued events to out, in order, until stopped; then it
// closes out.
func (s *subscriber) pump(out chan<- Event) {
	defer close(out)
	for {
		s.mu.Lock()
		batch := s.pending
		s.pending = nil
		s.mu.Unlock()
		for _, ev := range batch {
			select {
			case out <- ev:
			case <-s.done:
				return
			}
		}
		select {
		case <-s.wake:
		case <-s.done:
			return
		}
	}
}

// Subscribe returns a channel of every member change from now on, in the
// order the pool saw them, and a cancel func that ends the subscription
// (the channel is then closed; Close closes it too). Events are never
// dropped: they wait in memory for the reader.
func (p *Pool) Subscribe() (<-chan Event, func()) {
	s := &subscriber{wake: make(chan struct{}, 1), done: make(chan struct{})}
	out := make(chan Event)
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		close(out)
		return out, func() {}
	}
	p.subs[s] = struct{}{}
	p.mu.Unlock()
	go s.pump(out)
	cancel := func() {
		p.mu.Lock()
		delete(p.subs, s)
		p.mu.Unlock()
		s.stop()
	}
	return out, cancel
}
