package telemetry

import "testing"

func TestIsSecret(t *testing.T) {
	var r Redactor
	for _, n := range []string{"token", "X-Amz-Signature", "apiKey", "AWSAccessKeyId", "otp", "jwt", "auth[token]"} {
		if !r.isSecretParam(n) {
			t.Errorf("isSecretParam(%q) = false, want true", n)
		}
	}
	for _, n := range []string{"q", "page", "keyword", "author", "passage", "codec", "pinned"} {
		if r.isSecretParam(n) {
			t.Errorf("isSecretParam(%q) = true, want false", n)
		}
	}
	for _, n := range []string{"authorization", "COOKIE", "x-api-key", "Set-Cookie"} {
		if !r.secretHeader(n) {
			t.Errorf("secretHeader(%q) = false, want true", n)
		}
	}
	if r.secretHeader("Content-Type") {
		t.Errorf("secretHeader(Content-Type) = true, want false")
	}
}
