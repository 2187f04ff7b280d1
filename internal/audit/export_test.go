package audit

// SetScanWindow sets how many finished requests an audit scan of a
// remembers (frames stored after their final one are reported within
// them), and peak, told at the end of each audit scan the most it held at
// once: requests whose final frame it had not read, finished requests
// remembered, and ids of frames met before their request.
func SetScanWindow(a *Auditor, n int, peak func(open, finished, early int)) {
	a.scanWindow, a.scanPeak = n, peak
}

// SetTailLive sets fn to be told, by the live subscription of each Tail of
// a, of each live message whether it was queued and the bytes the queue
// held with it.
func SetTailLive(a *Auditor, fn func(held int64, queued bool)) { a.tailLive = fn }
