package journal

import "testing"

func TestLoadingReportsAndAborts(t *testing.T) {
	var l Loading
	field := func(k string) string {
		for _, kv := range l.Persistence() {
			if kv[0] == k {
				return kv[1]
			}
		}
		return "?"
	}
	if field("loading_eta_seconds") != "1" || field("loading_loaded_perc") != "0.00" {
		t.Fatalf("before any progress: %v", l.Persistence())
	}
	l.Begin(200)
	if l.Report(50, 200, 7) {
		t.Fatal("aborted before Abort")
	}
	if loaded, total, records := l.Progress(); loaded != 50 || total != 200 || records != 7 {
		t.Fatalf("Progress = %d %d %d", loaded, total, records)
	}
	if field("loading_loaded_perc") != "25.00" {
		t.Fatalf("perc %s", field("loading_loaded_perc"))
	}
	l.Abort()
	if !l.Report(60, 200, 8) {
		t.Fatal("Report after Abort does not say stop")
	}
	l.Done(200, 9)
	if field("loading_eta_seconds") != "0" || field("loading_loaded_records") != "9" {
		t.Fatalf("after Done: %v", l.Persistence())
	}
}
