package transfer

// Job is one job as a line of `delayd export` and `delayd import`. Times are
// unix milliseconds. A payload that is valid UTF-8 is written as Payload;
// any other as PayloadBase64 (standard encoding), exactly one of the two.
// Fields a job does not have are left out of the line.
type Job struct {
	Queue         string `json:"queue"`
	ID            string `json:"id"`
	State         string `json:"state,omitempty"` // delayed, ready or reserved; "" is delayed (or ready if due has passed)
	Due           int64  `json:"due"`
	Payload       string `json:"payload,omitempty"`
	PayloadBase64 string `json:"payload_base64,omitempty"`
	Deliveries    uint32 `json:"deliveries,omitempty"`
	AckDeadline   int64  `json:"ack_deadline,omitempty"` // reserved jobs only
	AckTimeout    int64  `json:"ack_timeout,omitempty"`  // ms
	Retry         int64  `json:"retry,omitempty"`
	DeadLetter    string `json:"deadletter,omitempty"`
	Group         string `json:"group,omitempty"`
	Priority      int    `json:"priority,omitempty"`
	Origin        string `json:"origin,omitempty"` // a dead-lettered job's queue before
	Error         string `json:"error,omitempty"`  // its last failure reason
}
