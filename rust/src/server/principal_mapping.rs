//! `ssl.principal.mapping.rules` (Kafka's KIP-371): how the subject of a client certificate
//! (RFC 2253, `x500.rs`) becomes the name of its `User:` principal.
//!
//! # Format
//! A list of rules, separated by commas (and spaces), tried in order; the first that
//! matches gives the name:
//! - `DEFAULT`: the whole subject, unchanged.
//! - `RULE:pattern/replacement/` with an optional `L` (lower case) or `U` (upper case)
//!   after the last `/`: when `pattern` (a regular expression) matches the whole subject,
//!   the name is `replacement` with `$1`, `$2`, ... replaced by the groups. A `/` inside the
//!   pattern or replacement is written `\/`.
//!
//! No rule matching is an error: the connection is refused (as Kafka does), so a list that
//! should accept every certificate ends with `DEFAULT`. Example:
//! `RULE:^CN=([^,]+),OU=brokers,.*$/$1/L,DEFAULT` names `CN=Broker1,OU=brokers,O=Example`
//! `User:broker1` and every other certificate by its whole subject.

use regex::Regex;

#[derive(Debug, Clone)]
enum Rule {
    Default,
    Replace { pattern: Regex, replacement: String, case: Option<char> },
}

/// Parsed `ssl.principal.mapping.rules`.
#[derive(Debug, Clone)]
pub struct PrincipalMapper {
    rules: Vec<Rule>,
    text: String,
}

impl Default for PrincipalMapper {
    fn default() -> Self {
        PrincipalMapper { rules: vec![Rule::Default], text: "DEFAULT".to_owned() }
    }
}

/// Reads up to the next unescaped `/`: (the text with `\/` unescaped, the rest after the `/`).
fn until_slash(s: &str) -> Option<(String, &str)> {
    let mut out = String::new();
    let mut chars = s.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' if s[i + 1..].starts_with('/') => {
                out.push('/');
                chars.next();
            }
            '/' => return Some((out, &s[i + 1..])),
            _ => out.push(c),
        }
    }
    None
}

impl PrincipalMapper {
    pub fn parse(text: &str) -> Result<PrincipalMapper, String> {
        let group_ref = Regex::new(r"\$(\d+)").map_err(|e| e.to_string())?;
        let mut rules = Vec::new();
        let mut rest = text.trim_start_matches([',', ' ', '\t']);
        while !rest.is_empty() {
            if let Some(after) = rest.strip_prefix("DEFAULT") {
                rules.push(Rule::Default);
                rest = after;
            } else if let Some(after) = rest.strip_prefix("RULE:") {
                let (pattern, after) =
                    until_slash(after).ok_or_else(|| format!("rule {rest:?}: no '/' after the pattern"))?;
                let (replacement, after) =
                    until_slash(after).ok_or_else(|| format!("rule {rest:?}: no '/' after the replacement"))?;
                let (case, after) = match after.chars().next() {
                    Some(c @ ('L' | 'U')) => (Some(c), &after[1..]),
                    _ => (None, after),
                };
                let pattern =
                    Regex::new(&format!("^(?:{pattern})$")).map_err(|e| format!("rule pattern {pattern:?}: {e}"))?;
                // Java's $1 is Rust's ${1} (a bare $1x would name a group "1x")
                let replacement = group_ref.replace_all(&replacement, "$${$1}").into_owned();
                rules.push(Rule::Replace { pattern, replacement, case });
                rest = after;
            } else {
                return Err(format!("{rest:?} is neither DEFAULT nor RULE:pattern/replacement/[LU]"));
            }
            let next = rest.trim_start_matches([' ', '\t']);
            if !next.is_empty() && !next.starts_with(',') {
                return Err(format!("unexpected {next:?} after a rule (rules are separated by commas)"));
            }
            rest = next.trim_start_matches([',', ' ', '\t']);
        }
        if rules.is_empty() {
            return Err("no rules (DEFAULT keeps the whole subject)".to_owned());
        }
        Ok(PrincipalMapper { rules, text: text.to_owned() })
    }

    /// Kafka's principal of a client certificate (DER): `User:` and its subject (RFC 2253,
    /// `x500.rs`) as the rules map it; Err says why not (unreadable, or no rule applies).
    pub fn principal(&self, der: &[u8]) -> Result<String, String> {
        let subject =
            super::x500::subject_name(der).map_err(|e| format!("the certificate's subject cannot be read: {e}"))?;
        self.name(&subject).map(|name| format!("User:{name}"))
    }

    /// The principal name for a certificate subject, or why no rule applies.
    pub fn name(&self, subject: &str) -> Result<String, String> {
        for rule in &self.rules {
            match rule {
                Rule::Default => return Ok(subject.to_owned()),
                Rule::Replace { pattern, replacement, case } => {
                    if pattern.is_match(subject) {
                        let name = pattern.replace(subject, replacement.as_str()).into_owned();
                        return Ok(match case {
                            Some('L') => name.to_lowercase(),
                            Some('U') => name.to_uppercase(),
                            _ => name,
                        });
                    }
                }
            }
        }
        Err(format!("no ssl.principal.mapping.rules rule applies to {subject:?} (rules {:?})", self.text))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_keeps_the_subject() {
        let m = PrincipalMapper::default();
        assert_eq!(m.name("CN=a,O=b").unwrap(), "CN=a,O=b");
        assert_eq!(PrincipalMapper::parse("DEFAULT").unwrap().name("CN=a").unwrap(), "CN=a");
    }

    #[test]
    fn rules_in_order_with_groups_and_case() {
        let m = PrincipalMapper::parse("RULE:^CN=([^,]+),OU=brokers,.*$/$1/L, RULE:^CN=(.*?),O=(.*)$/$2-$1x/U,DEFAULT")
            .unwrap();
        assert_eq!(m.name("CN=Broker1,OU=brokers,O=Example").unwrap(), "broker1");
        assert_eq!(m.name("CN=alice,O=Example").unwrap(), "EXAMPLE-ALICEX");
        assert_eq!(m.name("OU=x,O=y").unwrap(), "OU=x,O=y");
    }

    #[test]
    fn no_matching_rule_is_an_error() {
        let m = PrincipalMapper::parse("RULE:^CN=(.*)$/$1/").unwrap();
        assert_eq!(m.name("CN=a").unwrap(), "a");
        assert!(m.name("O=b").unwrap_err().contains("no ssl.principal.mapping.rules rule applies"));
    }

    #[test]
    fn escaped_slashes_and_bad_rules() {
        let m = PrincipalMapper::parse(r"RULE:^CN=a\/b$/x\/y/").unwrap();
        assert_eq!(m.name("CN=a/b").unwrap(), "x/y");
        for bad in ["", "RULE:abc", "RULE:a/b", "RULE:(/x/", "DEFAULTX", "NOPE"] {
            assert!(PrincipalMapper::parse(bad).is_err(), "{bad:?} should be refused");
        }
    }
}
