package journal

import "time"

// RunFlusher is the group commit loop of a log file, run on the owner's
// flusher goroutine (a leaf starts none): it writes what a kick or the
// once-a-second tick finds pending (records no client waits for: the
// clients' own waits write the rest), hands everysec's fsync to the syncer
// (syncReq, nil under other policies), and while a full disk refuses
// writes calls probe every ProbeEvery until it reports that probing may
// stop. When quit closes it writes and fsyncs everything pending and
// returns, after closing syncReq and waiting for syncDone.
func (j *Journal) RunFlusher(quit <-chan struct{}, syncReq chan<- struct{}, syncDone <-chan struct{}, probe func() bool) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	tick := t.C
	var probing <-chan time.Time // armed while a full disk refuses writes
	for {
		closing := false
		select {
		case <-j.Kick():
		case <-tick:
			if syncReq != nil && j.StartSync() {
				syncReq <- struct{}{} // the syncer is idle: never blocks
			}
			if !j.Owed() {
				continue
			}
			// Records nobody was woken to write: their client left
			// before it waited for them. Write them now.
		case <-probing:
			probing = nil
			if !probe() {
				probing = time.After(ProbeEvery)
			}
			continue
		case <-quit:
			closing = true
		}
		if j.Write() && probing == nil {
			probing = time.After(ProbeEvery)
		}
		if closing {
			if syncReq != nil {
				close(syncReq) // the fsync in flight ends first
				<-syncDone
			}
			j.SyncIfDirty()
			return
		}
	}
}

// RunSyncer runs everysec's fsyncs, one per request, away from the
// flusher, on the owner's syncer goroutine; it closes done and returns when
// req is closed, after the fsync in flight. A failed fsync is told to
// failed: writes already acknowledged may not be on disk, and the page
// cache's state is unknown, so the owner stops acknowledging.
func (j *Journal) RunSyncer(req <-chan struct{}, done chan<- struct{}, failed func(error)) {
	defer close(done)
	for range req {
		if err := j.Sync(); err != nil {
			failed(err)
		}
		j.SyncDone()
	}
}
