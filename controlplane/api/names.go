package api

import (
	"net/netip"
	"strings"
)

// Messages of the name checks, worded as Kubernetes words them so that
// users recognise them.
const (
	dns1123LabelMsg     = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character"
	dns1123SubdomainMsg = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character"
	qualifiedNameMsg    = "a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character, with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
	namePartMsg         = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
	labelValueMsg       = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
	envVarNameMsg       = "a valid environment variable name must consist of alphabetic characters, digits, '_', '-', or '.', and must not start with a digit"
)

// Length limits of names.
const (
	DNS1123LabelMaxLength     = 63
	DNS1123SubdomainMaxLength = 253
	QualifiedNameMaxLength    = 63
	LabelValueMaxLength       = 63
	TaintKeyMaxLength         = 253
	TaintValueMaxLength       = 63
)

func maxLenMsg(n int) string {
	switch n {
	case 15:
		return "must be no more than 15 characters"
	case 63:
		return "must be no more than 63 characters"
	case 253:
		return "must be no more than 253 characters"
	}
	return "is too long"
}

// isLowerAlnum reports whether c is a lower case letter or a digit.
func isLowerAlnum(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' }

// isAlnum reports whether c is an ASCII letter or digit.
func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// isLabelShape reports whether s is a non-empty run of lower case
// alphanumerics and '-' that starts and ends alphanumeric.
func isLabelShape(s string) bool {
	if s == "" || !isLowerAlnum(s[0]) || !isLowerAlnum(s[len(s)-1]) {
		return false
	}
	for i := 1; i < len(s)-1; i++ {
		if c := s[i]; !isLowerAlnum(c) && c != '-' {
			return false
		}
	}
	return true
}

// IsDNS1123Label checks s as an RFC 1123 label (namespace names, container
// and volume names). It returns nil when s is valid, else why not.
func IsDNS1123Label(s string) []string {
	var errs []string
	if len(s) > DNS1123LabelMaxLength {
		errs = append(errs, maxLenMsg(DNS1123LabelMaxLength))
	}
	if !isLabelShape(s) {
		errs = append(errs, dns1123LabelMsg)
	}
	return errs
}

// IsDNS1123Subdomain checks s as an RFC 1123 subdomain (most object names).
// It returns nil when s is valid, else why not.
func IsDNS1123Subdomain(s string) []string {
	var errs []string
	if len(s) > DNS1123SubdomainMaxLength {
		errs = append(errs, maxLenMsg(DNS1123SubdomainMaxLength))
	}
	if !isSubdomainShape(s) {
		errs = append(errs, dns1123SubdomainMsg)
	}
	return errs
}

// isSubdomainShape reports whether s is dot-separated RFC 1123 labels.
func isSubdomainShape(s string) bool {
	if s == "" {
		return false
	}
	for s != "" {
		part := s
		if i := strings.IndexByte(s, '.'); i >= 0 {
			part, s = s[:i], s[i+1:]
			if s == "" {
				return false // a trailing dot
			}
		} else {
			s = ""
		}
		if !isLabelShape(part) {
			return false
		}
	}
	return true
}

// isNamePart reports whether s is alphanumerics, '-', '_' and '.', starting
// and ending alphanumeric.
func isNamePart(s string) bool {
	if s == "" || !isAlnum(s[0]) || !isAlnum(s[len(s)-1]) {
		return false
	}
	for i := 1; i < len(s)-1; i++ {
		if c := s[i]; !isAlnum(c) && c != '-' && c != '_' && c != '.' {
			return false
		}
	}
	return true
}

// IsQualifiedName checks s as a label key, annotation key or finalizer: an
// optional DNS subdomain prefix and '/', then a name of at most 63
// characters. It returns nil when s is valid, else why not.
func IsQualifiedName(s string) []string {
	var errs []string
	name := s
	switch strings.Count(s, "/") {
	case 0:
	case 1:
		var prefix string
		prefix, name, _ = strings.Cut(s, "/")
		if prefix == "" {
			errs = append(errs, "prefix part must be non-empty")
		} else {
			for _, msg := range IsDNS1123Subdomain(prefix) {
				errs = append(errs, "prefix part "+msg)
			}
		}
	default:
		return []string{qualifiedNameMsg}
	}
	switch {
	case name == "":
		errs = append(errs, "name part must be non-empty")
	case len(name) > QualifiedNameMaxLength:
		errs = append(errs, "name part "+maxLenMsg(QualifiedNameMaxLength))
	}
	if name != "" && !isNamePart(name) {
		errs = append(errs, namePartMsg)
	}
	return errs
}

// IsValidLabelValue checks s as a label value: empty, or at most 63
// alphanumerics, '-', '_' and '.' that start and end alphanumeric. It
// returns nil when s is valid, else why not.
func IsValidLabelValue(s string) []string {
	var errs []string
	if len(s) > LabelValueMaxLength {
		errs = append(errs, maxLenMsg(LabelValueMaxLength))
	}
	if s != "" && !isNamePart(s) {
		errs = append(errs, labelValueMsg)
	}
	return errs
}

// isTaintChar reports whether c may appear in a taint key or value (SPEC
// TNT-1: letters, digits, '-', '.', '_').
func isTaintChar(c byte) bool { return isAlnum(c) || c == '-' || c == '.' || c == '_' }

// IsTaintKey checks s against SPEC TNT-1: at most 253 characters, starting
// with a letter or digit, of letters, digits, '-', '.' and '_', with an
// optional DNS subdomain prefix and '/'. Each message names the rule.
func IsTaintKey(s string) []string {
	var errs []string
	if s == "" {
		return []string{"a taint key must be non-empty"}
	}
	if len(s) > TaintKeyMaxLength {
		errs = append(errs, "a taint key must be no more than 253 characters")
	}
	name := s
	if i := strings.IndexByte(s, '/'); i >= 0 {
		prefix := s[:i]
		name = s[i+1:]
		if prefix == "" {
			errs = append(errs, "the prefix of a taint key (before '/') must be non-empty")
		} else if !isSubdomainShape(prefix) {
			errs = append(errs, "the prefix of a taint key (before '/') must be a DNS subdomain: "+dns1123SubdomainMsg)
		}
		if strings.IndexByte(name, '/') >= 0 {
			return append(errs, "a taint key may contain at most one '/'")
		}
		if name == "" {
			return append(errs, "the name of a taint key (after '/') must be non-empty")
		}
	}
	if !isAlnum(name[0]) {
		errs = append(errs, "a taint key must start with a letter or digit")
	}
	for i := 0; i < len(name); i++ {
		if !isTaintChar(name[i]) {
			errs = append(errs, "a taint key may contain only letters, digits, '-', '.' and '_'")
			break
		}
	}
	return errs
}

// IsTaintValue checks s against SPEC TNT-1: empty, or at most 63
// characters starting with a letter or digit, of letters, digits, '-', '.'
// and '_'. Each message names the rule.
func IsTaintValue(s string) []string {
	if s == "" {
		return nil
	}
	var errs []string
	if len(s) > TaintValueMaxLength {
		errs = append(errs, "a taint value must be no more than 63 characters")
	}
	if !isAlnum(s[0]) {
		errs = append(errs, "a taint value must start with a letter or digit")
	}
	for i := 0; i < len(s); i++ {
		if !isTaintChar(s[i]) {
			errs = append(errs, "a taint value may contain only letters, digits, '-', '.' and '_'")
			break
		}
	}
	return errs
}

// IsEnvVarName checks s as an environment variable name.
func IsEnvVarName(s string) []string {
	if s == "" || s[0] >= '0' && s[0] <= '9' {
		return []string{envVarNameMsg}
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !isAlnum(c) && c != '_' && c != '-' && c != '.' {
			return []string{envVarNameMsg}
		}
	}
	return nil
}

// IsPortName checks s as a port name (an IANA service name): at most 15
// lower case alphanumerics and '-', with at least one letter, not starting
// or ending with '-' and without "--".
func IsPortName(s string) []string {
	var errs []string
	if len(s) > 15 {
		errs = append(errs, maxLenMsg(15))
	}
	letter := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' {
			letter = true
		}
		if !isLowerAlnum(c) && c != '-' {
			return append(errs, "must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)")
		}
	}
	if strings.Contains(s, "--") {
		errs = append(errs, "must not contain consecutive hyphens")
	}
	if s != "" && (s[0] == '-' || s[len(s)-1] == '-') {
		errs = append(errs, "must not begin or end with a hyphen")
	}
	if !letter {
		errs = append(errs, "must contain at least one letter (a-z)")
	}
	return errs
}

// isValidPort reports whether p is a TCP/UDP port number, 1 to 65535.
func isValidPort(p int32) bool { return p >= 1 && p <= 65535 }

// isIP reports whether s is an IPv4 or IPv6 address.
func isIP(s string) bool {
	_, err := netip.ParseAddr(s)
	return err == nil
}
