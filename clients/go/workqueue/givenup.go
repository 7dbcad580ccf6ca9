package workqueue

import "sync"

// givenUpFinishes are the Finishes a session sent for leases it gave up
// (lost: expired, revoked, past the stop timeout). The sidecar refuses such
// a Finish when the lease had ended on its side too, which is expected, not
// worth a warning; a refusal of any other Finish is.
//
// An entry goes when its refusal comes, however late (a sidecar that was
// stopped, say with SIGSTOP, answers when it resumes), or once the sidecar
// is known to have handled the Finish without refusing it: it applied it
// (it still held the lease) and, asked to answer only failures
// (Open.AckFailuresOnly), said nothing. The sidecar handles a stream's
// messages in order and answers every Extend, so an answer to an Extend
// sent after the Finish is that proof. Idle, with no Extend to answer, the
// few entries left stay until the stream ends.
type givenUpFinishes struct {
	mu sync.Mutex
	// extendsBefore holds, by token, how many Extends the stream had sent
	// before the lease's Finish.
	extendsBefore map[uint64]uint64
	// extendsAnswered counts the Extended answers received.
	extendsAnswered uint64
}

// add notes a given-up lease's Finish, before it is sent (its refusal must
// not come first), with the number of Extends sent before it.
func (g *givenUpFinishes) add(token, extendsSent uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.extendsBefore == nil {
		g.extendsBefore = make(map[uint64]uint64)
	}
	g.extendsBefore[token] = extendsSent
}

// remove forgets a Finish that could not be sent.
func (g *givenUpFinishes) remove(token uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.extendsBefore, token)
}

// refused reports whether a refused Finish was one of a given-up lease (and
// forgets it).
func (g *givenUpFinishes) refused(token uint64) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	_, ok := g.extendsBefore[token]
	delete(g.extendsBefore, token)
	return ok
}

// extendAnswered counts an Extended answer and forgets the Finishes sent
// before the Extend it answers: the sidecar handled them without a refusal.
func (g *givenUpFinishes) extendAnswered() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.extendsAnswered++
	for token, before := range g.extendsBefore {
		// The answer is to the extendsAnswered-th Extend sent; a Finish
		// with fewer Extends before it was sent before that Extend.
		if before < g.extendsAnswered {
			delete(g.extendsBefore, token)
		}
	}
}
