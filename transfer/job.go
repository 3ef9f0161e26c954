package transfer

// Job is one job as a line of `delayd export` and `delayd import`. Times are
// unix milliseconds. A payload that is valid UTF-8 is written as Payload;
// any other as PayloadBase64 (standard encoding), exactly one of the two.
// Fields a job does not have are left out of the line.
//
// A zero field asks for the server's default, so a reader of another
// system fills in only what it knows. Where zero is also a value a job can
// have, -1 says "none": AckTimeout -1 is no ack timeout (a pop removes the
// job; DELAY.ADD's ACKTIMEOUT 0), Retry -1 no redelivery (RETRY 0); an
// omitted Retry is the default, unlimited.
type Job struct {
	Queue         string `json:"queue"`
	ID            string `json:"id"`
	State         string `json:"state,omitempty"` // delayed, ready or reserved; "" is delayed (or ready if due has passed)
	Due           int64  `json:"due"`
	Payload       string `json:"payload,omitempty"`
	PayloadBase64 string `json:"payload_base64,omitempty"`
	Deliveries    uint32 `json:"deliveries,omitempty"`
	AckDeadline   int64  `json:"ack_deadline,omitempty"` // reserved jobs only
	AckTimeout    int64  `json:"ack_timeout,omitempty"`  // ms; -1: none
	Retry         int64  `json:"retry,omitempty"`        // redeliveries allowed; -1: none
	DeadLetter    string `json:"deadletter,omitempty"`
	Group         string `json:"group,omitempty"`
	Priority      int    `json:"priority,omitempty"`
	Origin        string `json:"origin,omitempty"` // a dead-lettered job's queue before
	// A dead-lettered job's options in its origin queue, which DELAY.REQUEUE
	// gives back (as AckTimeout and Retry; OriginRetry 0: unlimited).
	OriginAckTimeout int64  `json:"origin_ack_timeout,omitempty"`
	OriginRetry      int64  `json:"origin_retry,omitempty"`
	OriginDeadLetter string `json:"origin_deadletter,omitempty"`
	Error            string `json:"error,omitempty"` // its last failure reason
}
