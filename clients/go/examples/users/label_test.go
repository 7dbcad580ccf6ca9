package main

import "testing"

func TestLabelValueShouldBeAValidLabel(t *testing.T) {
	cases := map[string]string{
		"Ada Lovelace":           "Ada-Lovelace",
		"Ada Lovelace (renamed)": "Ada-Lovelace--renamed",
		"  émile  ":              "mile",
		"x.y_z-1":                "x.y_z-1",
		"":                       "",
	}
	for in, want := range cases {
		if got := labelValue(in); got != want {
			t.Errorf("labelValue(%q) = %q, want %q", in, got, want)
		}
	}
	long := labelValue(string(make([]byte, 100)) + "a")
	if len(long) > 63 {
		t.Errorf("LabelValue of 101 characters is %d long", len(long))
	}
}
