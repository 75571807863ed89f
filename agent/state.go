package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/outpost-edge/outpost/controlplane/api"
)

// Buckets of the state file.
var (
	bucketPods = []byte("pods") // pod UID → the pod's JSON, as last desired
	bucketMeta = []byte("meta") // small facts: lastContact, fence
	// bucketFenced: pod UID → the pod's JSON, for the pods the agent
	// stopped by its own rule while cut off (TNT-9); a restart must not
	// bring them back.
	bucketFenced = []byte("fenced")
)

var (
	keyLastContact = []byte("lastContact")
	keyFence       = []byte("fence")
)

// state is the agent's bbolt file: what it must run when it cannot ask.
type state struct {
	db *bolt.DB
}

func openState(path string) (*state, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 5 * time.Second})
	if err != nil {
		if errors.Is(err, bolt.ErrTimeout) {
			return nil, fmt.Errorf("open %s: another agent holds it: %w", path, err)
		}
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketPods, bucketMeta, bucketFenced} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("init %s: %w", path, err)
	}
	return &state{db: db}, nil
}

func (s *state) Close() error { return s.db.Close() }

// pods returns the desired pods as last saved.
func (s *state) pods() ([]*api.Pod, error) {
	var out []*api.Pod
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketPods).ForEach(func(k, v []byte) error {
			p := new(api.Pod)
			if err := json.Unmarshal(v, p); err != nil {
				return fmt.Errorf("pod %s in the state file: %w", k, err)
			}
			out = append(out, p)
			return nil
		})
	})
	return out, err
}

// putPod saves pod as desired.
func (s *state) putPod(p *api.Pod) error {
	b, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("encode pod %s/%s: %w", p.Namespace, p.Name, err)
	}
	return s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketPods).Put([]byte(p.UID), b)
	})
}

// deletePod forgets a pod.
func (s *state) deletePod(uid string) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketPods).Delete([]byte(uid))
	})
}

// replacePods makes the saved set exactly pods, in one transaction: the
// control plane's list wins.
func (s *state) replacePods(pods []*api.Pod) error {
	enc := make(map[string][]byte, len(pods))
	for _, p := range pods {
		b, err := json.Marshal(p)
		if err != nil {
			return fmt.Errorf("encode pod %s/%s: %w", p.Namespace, p.Name, err)
		}
		enc[p.UID] = b
	}
	return s.db.Update(func(tx *bolt.Tx) error {
		if err := tx.DeleteBucket(bucketPods); err != nil {
			return err
		}
		b, err := tx.CreateBucket(bucketPods)
		if err != nil {
			return err
		}
		for uid, v := range enc {
			if err := b.Put([]byte(uid), v); err != nil {
				return err
			}
		}
		return nil
	})
}

// setLastContact records when the control plane last answered.
func (s *state) setLastContact(t time.Time) error {
	v, _ := t.UTC().MarshalText()
	return s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Put(keyLastContact, v) })
}

// lastContact is when the control plane last answered (zero if never).
func (s *state) lastContact() time.Time {
	var t time.Time
	_ = s.db.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bucketMeta).Get(keyLastContact); v != nil {
			_ = t.UnmarshalText(v)
		}
		return nil
	})
	return t
}

// fenceRecord is the fence clock as saved: valid only in the same boot,
// whose clock (CLOCK_BOOTTIME) it counts in.
type fenceRecord struct {
	BootID string `json:"bootID"`
	// LastAck is the boot clock when the last acknowledged heartbeat or
	// status was sent.
	LastAck time.Duration `json:"lastAck"`
	// Grace is the node monitor grace period the leader last gave.
	Grace time.Duration `json:"grace"`
}

func (s *state) setFence(r fenceRecord) error {
	v, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Put(keyFence, v) })
}

func (s *state) fence() (fenceRecord, bool) {
	var r fenceRecord
	ok := false
	_ = s.db.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bucketMeta).Get(keyFence); v != nil {
			ok = json.Unmarshal(v, &r) == nil
		}
		return nil
	})
	return r, ok
}

// fencePod moves pod from the desired pods to the fenced ones, in one
// transaction.
func (s *state) fencePod(p *api.Pod) error {
	v, err := json.Marshal(p)
	if err != nil {
		return err
	}
	return s.db.Update(func(tx *bolt.Tx) error {
		if err := tx.Bucket(bucketPods).Delete([]byte(p.UID)); err != nil {
			return err
		}
		return tx.Bucket(bucketFenced).Put([]byte(p.UID), v)
	})
}

// fencedPods are the pods the agent stopped by its own rule.
func (s *state) fencedPods() (map[string]*api.Pod, error) {
	out := map[string]*api.Pod{}
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketFenced).ForEach(func(k, v []byte) error {
			p := new(api.Pod)
			if err := json.Unmarshal(v, p); err != nil {
				return fmt.Errorf("fenced pod %s in the state file: %w", k, err)
			}
			out[string(k)] = p
			return nil
		})
	})
	return out, err
}

func (s *state) unfencePod(uid string) error {
	return s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketFenced).Delete([]byte(uid)) })
}
