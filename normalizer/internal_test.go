package normalizer

import "testing"

func TestCleanURL(t *testing.T) {
	for in, want := range map[string]string{
		"https://user:pw@host/hook?x=1":             "https://host/hook?x=1",
		"https://host/hook?token=abc&x=1":           "https://host/hook?token=%5Bredacted%5D&x=1",
		"https://host/hook?api_key=abc":             "https://host/hook?api_key=%5Bredacted%5D",
		"https://host/hook":                         "https://host/hook",
		"http://[::1]:namedport":                    "",
		"https://host/p?X-Amz-Signature=s&sig=zzzz": "https://host/p?X-Amz-Signature=%5Bredacted%5D&sig=%5Bredacted%5D",
	} {
		if got := cleanURL(in); got != want {
			t.Errorf("cleanURL(%q) = %q, want %q", in, got, want)
		}
	}
}
