//! ROS 2 naming rules: node names, namespaces, topic and service names.
//!
//! These functions follow the checks of ROS 2's `rmw_validate_node_name`,
//! `rmw_validate_namespace`, `rcl_validate_topic_name`,
//! `rmw_validate_full_topic_name` and `rcl_expand_topic_name`:
//!
//! * a **node name** is a single token such as `talker`;
//! * a **namespace** is absolute, such as `/` or `/robot1/arm`
//!   ([`normalize_namespace`] turns the user forms `""` and `robot1` into `/` and `/robot1`);
//! * a **topic or service name**, as the user writes it, may be relative (`chatter`),
//!   absolute (`/chatter`), private (`~/status`, relative to the node) and may contain the
//!   substitutions `{node}`, `{ns}` and `{namespace}`;
//! * [`expand_topic_name`] turns such a name into a **fully qualified name** (FQN) such as
//!   `/robot1/chatter`, which only contains `[A-Za-z0-9_/]`.
//!
//! Every failure is a [`NameError`] that quotes the name, the rule it broke and the byte index
//! of the offending character.
//!
//! ```
//! use myelin_core::names::{self, NameKind};
//!
//! names::validate_node_name("talker")?;
//! let ns = names::normalize_namespace("robot1")?;
//! assert_eq!(ns, "/robot1");
//! assert_eq!(names::node_fqn(&ns, "talker"), "/robot1/talker");
//!
//! let chatter = names::expand_topic_name("chatter", "talker", &ns, NameKind::Topic)?;
//! assert_eq!(chatter, "/robot1/chatter");
//! let private = names::expand_topic_name("~/status", "talker", &ns, NameKind::Service)?;
//! assert_eq!(private, "/robot1/talker/status");
//!
//! let err = names::validate_node_name("7up").unwrap_err();
//! assert_eq!(err.rule, "must not start with a number");
//! assert_eq!(
//!     err.to_string(),
//!     "invalid node name \"7up\": must not start with a number (at character 0)"
//! );
//! # Ok::<(), names::NameError>(())
//! ```

use std::fmt;

/// Maximum length in bytes of a node name (as `RMW_NODE_NAME_MAX_NAME_LENGTH`).
pub const MAX_NODE_NAME_LENGTH: usize = 255;

/// Maximum length in bytes of a fully qualified topic or service name.
///
/// rmw uses `255 - 8` to leave room for DDS prefixes such as `rt/`; myelin has no such
/// prefixes and uses the full 255.
pub const MAX_TOPIC_NAME_LENGTH: usize = 255;

/// Maximum length in bytes of a namespace: [`MAX_TOPIC_NAME_LENGTH`] minus 2, so that the
/// shortest topic below it (`/x`) still fits (rmw reserves the same 2 characters).
pub const MAX_NAMESPACE_LENGTH: usize = MAX_TOPIC_NAME_LENGTH - 2;

/// The rules, as quoted in [`NameError::rule`].
mod rule {
    pub(super) const EMPTY: &str = "must not be empty";
    pub(super) const NODE_CHARACTERS: &str = "must contain only alphanumerics and '_'";
    pub(super) const STARTS_WITH_NUMBER: &str = "must not start with a number";
    pub(super) const NODE_TOO_LONG: &str = "must not be longer than 255 characters";
    pub(super) const NOT_ABSOLUTE: &str = "must start with '/'";
    pub(super) const ENDS_WITH_SLASH: &str = "must not end with '/'";
    pub(super) const NAMESPACE_ENDS_WITH_SLASH: &str =
        "must not end with '/', unless it is exactly \"/\"";
    pub(super) const ABSOLUTE_CHARACTERS: &str = "must contain only alphanumerics, '_' and '/'";
    pub(super) const REPEATED_SLASH: &str = "must not contain repeated '/'";
    pub(super) const TOKEN_STARTS_WITH_NUMBER: &str = "a token must not start with a number";
    pub(super) const NAMESPACE_TOO_LONG: &str = "must not be longer than 253 characters";
    pub(super) const TOPIC_TOO_LONG: &str = "must not be longer than 255 characters";
    pub(super) const TOPIC_CHARACTERS: &str =
        "must contain only alphanumerics, '_', '/', '~', '{' and '}'";
    pub(super) const MISPLACED_TILDE: &str = "'~' is only allowed as the first character";
    pub(super) const TILDE_NOT_FOLLOWED_BY_SLASH: &str = "'~' must be followed by '/' or be alone";
    pub(super) const UNMATCHED_BRACE: &str = "must not have unmatched curly braces";
    pub(super) const NESTED_BRACE: &str = "substitutions must not be nested";
    pub(super) const SUBSTITUTION_EMPTY: &str = "a substitution must not be empty";
    pub(super) const SUBSTITUTION_CHARACTERS: &str =
        "a substitution must contain only alphanumerics and '_'";
    pub(super) const SUBSTITUTION_STARTS_WITH_NUMBER: &str =
        "a substitution must not start with a number";
    pub(super) const UNKNOWN_SUBSTITUTION: &str =
        "unknown substitution (expected {node}, {ns} or {namespace})";
}

/// Which kind of name was being checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameKind {
    /// A node name, such as `talker`.
    Node,
    /// A namespace, such as `/robot1`.
    Namespace,
    /// A topic name, such as `chatter` or `/robot1/chatter`.
    Topic,
    /// A service name, such as `add_two_ints` (same rules as topics).
    Service,
}

impl fmt::Display for NameKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            NameKind::Node => "node",
            NameKind::Namespace => "namespace",
            NameKind::Topic => "topic",
            NameKind::Service => "service",
        })
    }
}

/// An invalid node, namespace, topic or service name: quotes the name and the rule it broke.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {kind} name {name:?}: {rule} (at character {index})")]
pub struct NameError {
    /// Which kind of name was invalid.
    pub kind: NameKind,
    /// The invalid name. For a name that became invalid through [`expand_topic_name`],
    /// this is the expanded name.
    pub name: String,
    /// The rule the name broke, as a short sentence such as `"must not start with a number"`.
    pub rule: &'static str,
    /// Byte index in [`name`](Self::name) of the offending character (0 where no single
    /// character is at fault, e.g. an empty name; the first byte past the limit for a name
    /// that is too long).
    pub index: usize,
}

impl NameError {
    fn new(kind: NameKind, name: &str, rule: &'static str, index: usize) -> Self {
        NameError {
            kind,
            name: name.to_owned(),
            rule,
            index,
        }
    }
}

/// `[A-Za-z0-9_]`, locale independent.
fn is_word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// Validate a node name: non-empty, only `[A-Za-z0-9_]`, not starting with a digit and at
/// most [`MAX_NODE_NAME_LENGTH`] bytes.
///
/// # Errors
///
/// A [`NameError`] of kind [`NameKind::Node`] for the first rule broken. The checks run in the
/// order above (as in `rmw_validate_node_name`), so a name with a bad character and a leading
/// digit reports the bad character.
pub fn validate_node_name(name: &str) -> Result<(), NameError> {
    let fail = |rule, index| Err(NameError::new(NameKind::Node, name, rule, index));
    let bytes = name.as_bytes();
    if bytes.is_empty() {
        return fail(rule::EMPTY, 0);
    }
    if let Some(i) = bytes.iter().position(|&b| !is_word_byte(b)) {
        return fail(rule::NODE_CHARACTERS, i);
    }
    if bytes[0].is_ascii_digit() {
        return fail(rule::STARTS_WITH_NUMBER, 0);
    }
    if bytes.len() > MAX_NODE_NAME_LENGTH {
        return fail(rule::NODE_TOO_LONG, MAX_NODE_NAME_LENGTH);
    }
    Ok(())
}

/// Validate an absolute namespace such as `/` or `/robot1/arm`.
///
/// Rules (as `rmw_validate_namespace`): non-empty, starts with `/`, no trailing `/` unless it
/// is exactly `/`, only `[A-Za-z0-9_/]`, no `//`, no token starting with a digit, at most
/// [`MAX_NAMESPACE_LENGTH`] (253) bytes. Use [`normalize_namespace`] for user input that may be
/// empty or relative.
///
/// # Errors
///
/// A [`NameError`] of kind [`NameKind::Namespace`] for the first rule broken, in the order
/// above.
pub fn validate_namespace(ns: &str) -> Result<(), NameError> {
    validate_fully_qualified(ns, NameKind::Namespace)
}

/// Normalise a user-given namespace: `""` -> `"/"`, `"robot"` -> `"/robot"` (ROS 2 prefixes a
/// relative namespace with `/`), then validate it with [`validate_namespace`].
///
/// Nothing else is rewritten: `"/robot/"` is still rejected for its trailing `/`.
///
/// # Errors
///
/// A [`NameError`] of kind [`NameKind::Namespace`], as [`validate_namespace`]. When the input
/// was relative, the error quotes the input as given and its index points into it; the length
/// limit applies to the normalised form.
pub fn normalize_namespace(ns: &str) -> Result<String, NameError> {
    if ns.is_empty() {
        return Ok("/".to_owned());
    }
    if ns.starts_with('/') {
        validate_namespace(ns)?;
        return Ok(ns.to_owned());
    }
    let absolute = format!("/{ns}");
    validate_namespace(&absolute).map_err(|e| NameError {
        name: ns.to_owned(),
        index: e.index.saturating_sub(1),
        ..e
    })?;
    Ok(absolute)
}

/// Validate a (possibly relative / private / with substitutions) topic or service name as the
/// user wrote it; `kind` (normally [`NameKind::Topic`] or [`NameKind::Service`]) is only used
/// in the error.
///
/// Rules (as `rcl_validate_topic_name`, plus the `//` and `{}` checks that rcl leaves to the
/// expanded name):
///
/// * non-empty, does not end with `/`;
/// * only `[A-Za-z0-9_/~{}]`;
/// * `~` only as the first character, and then followed by `/` or nothing (`~` alone is the
///   node's own name);
/// * balanced, non-nested `{...}` whose content is non-empty `[A-Za-z0-9_]` not starting with
///   a digit;
/// * no `//`;
/// * no token (the first one, or one after a `/`) starts with a digit; a token starting with
///   `{` is fine.
///
/// There is no length limit here: the limit applies to the expanded name (see
/// [`expand_topic_name`]), because substitutions change the length.
///
/// # Errors
///
/// A [`NameError`] of the given `kind` for the first rule broken.
pub fn validate_topic_name(name: &str, kind: NameKind) -> Result<(), NameError> {
    let fail = |rule, index| Err(NameError::new(kind, name, rule, index));
    let bytes = name.as_bytes();
    let Some(&last) = bytes.last() else {
        return fail(rule::EMPTY, 0);
    };
    if bytes[0].is_ascii_digit() {
        return fail(rule::TOKEN_STARTS_WITH_NUMBER, 0);
    }
    if last == b'/' {
        return fail(rule::ENDS_WITH_SLASH, bytes.len() - 1);
    }
    // Characters and substitutions.
    let mut open_brace: Option<usize> = None;
    for (i, &b) in bytes.iter().enumerate() {
        match (b, open_brace) {
            (b'{', Some(_)) => return fail(rule::NESTED_BRACE, i),
            (b'{', None) => open_brace = Some(i),
            (b'}', None) => return fail(rule::UNMATCHED_BRACE, i),
            (b'}', Some(open)) if open + 1 == i => return fail(rule::SUBSTITUTION_EMPTY, open),
            (b'}', Some(_)) => open_brace = None,
            (_, Some(open)) => {
                if !is_word_byte(b) {
                    return fail(rule::SUBSTITUTION_CHARACTERS, i);
                }
                if open + 1 == i && b.is_ascii_digit() {
                    return fail(rule::SUBSTITUTION_STARTS_WITH_NUMBER, i);
                }
            }
            (b'~', None) if i != 0 => return fail(rule::MISPLACED_TILDE, i),
            (b'~' | b'/', None) => {}
            (_, None) if is_word_byte(b) => {}
            (_, None) => return fail(rule::TOPIC_CHARACTERS, i),
        }
    }
    if let Some(open) = open_brace {
        return fail(rule::UNMATCHED_BRACE, open);
    }
    if bytes[0] == b'~' && bytes.len() > 1 && bytes[1] != b'/' {
        return fail(rule::TILDE_NOT_FOLLOWED_BY_SLASH, 1);
    }
    // Tokens: no empty token, no token starting with a digit.
    for (i, pair) in bytes.windows(2).enumerate() {
        if pair[0] == b'/' {
            if pair[1] == b'/' {
                return fail(rule::REPEATED_SLASH, i + 1);
            }
            if pair[1].is_ascii_digit() {
                return fail(rule::TOKEN_STARTS_WITH_NUMBER, i + 1);
            }
        }
    }
    Ok(())
}

/// Validate a fully qualified topic/service name (as `rmw_validate_full_topic_name`) or, with
/// `kind == Namespace`, a namespace (which may also be exactly `/`, with a lower length limit).
fn validate_fully_qualified(name: &str, kind: NameKind) -> Result<(), NameError> {
    let is_namespace = kind == NameKind::Namespace;
    if is_namespace && name == "/" {
        return Ok(());
    }
    let fail = |rule, index| Err(NameError::new(kind, name, rule, index));
    let bytes = name.as_bytes();
    let Some(&last) = bytes.last() else {
        return fail(rule::EMPTY, 0);
    };
    if bytes[0] != b'/' {
        return fail(rule::NOT_ABSOLUTE, 0);
    }
    if last == b'/' {
        let rule = if is_namespace {
            rule::NAMESPACE_ENDS_WITH_SLASH
        } else {
            rule::ENDS_WITH_SLASH
        };
        return fail(rule, bytes.len() - 1);
    }
    if let Some(i) = bytes.iter().position(|&b| !is_word_byte(b) && b != b'/') {
        return fail(rule::ABSOLUTE_CHARACTERS, i);
    }
    for (i, pair) in bytes.windows(2).enumerate() {
        if pair[0] == b'/' {
            if pair[1] == b'/' {
                return fail(rule::REPEATED_SLASH, i + 1);
            }
            if pair[1].is_ascii_digit() {
                return fail(rule::TOKEN_STARTS_WITH_NUMBER, i + 1);
            }
        }
    }
    let (max, too_long) = if is_namespace {
        (MAX_NAMESPACE_LENGTH, rule::NAMESPACE_TOO_LONG)
    } else {
        (MAX_TOPIC_NAME_LENGTH, rule::TOPIC_TOO_LONG)
    };
    if bytes.len() > max {
        return fail(too_long, max);
    }
    Ok(())
}

/// Expand a topic or service name to a fully qualified name, as `rcl_expand_topic_name`.
///
/// * `name` is checked with [`validate_topic_name`], `node_name` with [`validate_node_name`]
///   and `namespace` with [`validate_namespace`] (it must already be absolute: pass it
///   through [`normalize_namespace`] first); their errors are returned as they are.
/// * A leading `~` is replaced by the node's fully qualified name ([`node_fqn`]): `~` alone is
///   `/a/node`, `~/x` is `/a/node/x`.
/// * `{node}` is replaced by the node name; `{ns}` and `{namespace}` by the namespace. When
///   the namespace is `/` and the substitution is followed by `/`, it is replaced by nothing,
///   so `{ns}/chatter` gives `/chatter` rather than `//chatter`. Any other substitution is
///   an error with rule `"unknown substitution (expected {node}, {ns} or {namespace})"`
///   whose index points at its `{` in `name`.
/// * A name that is still relative is prefixed with the namespace: `chatter` in `/a` is
///   `/a/chatter`; an absolute name stays as it is.
///
/// The result is validated as a fully qualified name: starts with `/`, only `[A-Za-z0-9_/]`,
/// no `//`, no trailing `/`, no token starting with a digit, at most
/// [`MAX_TOPIC_NAME_LENGTH`] (255) bytes.
///
/// # Errors
///
/// * an invalid `name` (kind `kind`), `node_name` (kind [`NameKind::Node`]) or `namespace`
///   (kind [`NameKind::Namespace`]), as returned by their validators;
/// * an unknown substitution (kind `kind`);
/// * an expanded name that is not a valid fully qualified name: the error (kind `kind`)
///   quotes the expanded name and its index points into it.
pub fn expand_topic_name(
    name: &str,
    node_name: &str,
    namespace: &str,
    kind: NameKind,
) -> Result<String, NameError> {
    validate_topic_name(name, kind)?;
    validate_node_name(node_name)?;
    validate_namespace(namespace)?;

    let mut expanded = String::with_capacity(name.len() + namespace.len() + node_name.len() + 1);
    let mut rest = name;
    if let Some(after_tilde) = name.strip_prefix('~') {
        expanded.push_str(&node_fqn(namespace, node_name));
        rest = after_tilde;
    }
    // Validation guarantees balanced, non-nested, non-empty braces.
    while let Some(open) = rest.find('{') {
        let close = open + rest[open..].find('}').unwrap_or(rest.len() - open);
        let key = &rest[open + 1..close];
        let after = rest.get(close + 1..).unwrap_or("");
        expanded.push_str(&rest[..open]);
        match key {
            "node" => expanded.push_str(node_name),
            "ns" | "namespace" => {
                if !(namespace == "/" && after.starts_with('/')) {
                    expanded.push_str(namespace);
                }
            }
            _ => {
                let index = name.len() - rest.len() + open;
                return Err(NameError::new(
                    kind,
                    name,
                    rule::UNKNOWN_SUBSTITUTION,
                    index,
                ));
            }
        }
        rest = after;
    }
    expanded.push_str(rest);

    if !expanded.starts_with('/') {
        expanded = node_fqn(namespace, &expanded);
    }
    validate_fully_qualified(&expanded, kind)?;
    Ok(expanded)
}

/// Fully qualified node name: `"/" + name` in the root namespace, or `ns + "/" + name`.
///
/// Does not validate; a namespace ending in `/` (including `""`, treated as `/`) gets no
/// extra separator.
#[must_use]
pub fn node_fqn(namespace: &str, node_name: &str) -> String {
    if namespace.is_empty() {
        format!("/{node_name}")
    } else if namespace.ends_with('/') {
        format!("{namespace}{node_name}")
    } else {
        format!("{namespace}/{node_name}")
    }
}

/// The candidate closest to `word` by edit distance, if it is close enough
/// to be a typo of it (at most a third of its length, and at least one
/// edit): the "did you mean" of error messages.
///
/// ```
/// use myelin_core::names::did_you_mean;
/// assert_eq!(did_you_mean("lineer", ["linear", "angular"]), Some("linear"));
/// assert_eq!(did_you_mean("colour", ["linear", "angular"]), None);
/// assert_eq!(did_you_mean("zneoh", ["intra", "shm", "zenoh"]), Some("zenoh"));
/// ```
pub fn did_you_mean<'a>(
    word: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    let limit = (word.chars().count() / 3).max(1);
    candidates
        .into_iter()
        .map(|c| (edit_distance(word, c), c))
        .filter(|&(d, _)| d <= limit)
        .min_by_key(|&(d, _)| d)
        .map(|(_, c)| c)
}

/// Edit distance by chars: insertions, deletions, substitutions and
/// swaps of two neighbours (the commonest typo, `zneoh`) each count 1
/// (optimal string alignment).
fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    // Three rows: two back (for swaps), one back, and this one.
    let mut before: Vec<usize> = vec![0; b.len() + 1];
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur: Vec<usize> = vec![0; b.len() + 1];
    for i in 1..=a.len() {
        cur[0] = i;
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut d = (prev[j] + 1).min(cur[j - 1] + 1).min(prev[j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                d = d.min(before[j - 2] + 1);
            }
            cur[j] = d;
        }
        std::mem::swap(&mut before, &mut prev);
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
}

/// For a serde "unknown field `x`, expected `a` or `b`" error: the
/// expected field closest to `x` (see [`did_you_mean`]), taken from the
/// error's own list, else from `known`.
///
/// ```
/// use myelin_core::names::did_you_mean_field;
/// let e = "unknown field `lineer`, expected `linear` or `angular` at line 1 column 9";
/// assert_eq!(did_you_mean_field(e, &[]), Some("linear".to_string()));
/// let flat = "unknown field `qos_dept` at line 1 column 123";
/// assert_eq!(did_you_mean_field(flat, &["qos_depth", "topic_name"]), Some("qos_depth".to_string()));
/// ```
pub fn did_you_mean_field(error: &str, known: &[&str]) -> Option<String> {
    let (_, rest) = error.split_once("unknown field `")?;
    let (word, tail) = rest.split_once('`')?;
    let listed: Vec<&str> = match tail.split_once("expected") {
        Some((_, list)) => list.split('`').skip(1).step_by(2).collect(),
        None => Vec::new(),
    };
    let candidates = if listed.is_empty() {
        known.to_vec()
    } else {
        listed
    };
    did_you_mean(word, candidates).map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn long(prefix: &str, len: usize) -> String {
        let mut s = prefix.to_owned();
        while s.len() < len {
            s.push('a');
        }
        s
    }

    /// Asserts `result` is an error of `kind` for `name` with `rule` at `index`.
    #[track_caller]
    fn assert_err<T: fmt::Debug>(
        result: Result<T, NameError>,
        kind: NameKind,
        name: &str,
        rule: &str,
        index: usize,
    ) {
        let err = result.expect_err(&format!("{name:?} should be invalid ({rule})"));
        assert_eq!(err.kind, kind, "kind for {name:?}: {err}");
        assert_eq!(err.rule, rule, "rule for {name:?}: {err}");
        assert_eq!(err.name, name, "name for {name:?}: {err}");
        assert_eq!(err.index, index, "index for {name:?}: {err}");
    }

    #[test]
    fn kind_display() {
        assert_eq!(NameKind::Node.to_string(), "node");
        assert_eq!(NameKind::Namespace.to_string(), "namespace");
        assert_eq!(NameKind::Topic.to_string(), "topic");
        assert_eq!(NameKind::Service.to_string(), "service");
    }

    #[test]
    fn error_display() {
        let err = validate_topic_name("foo/~bar", NameKind::Service).unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid service name \"foo/~bar\": '~' is only allowed as the first character \
             (at character 4)"
        );
        let err = validate_namespace("/robot/").unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid namespace name \"/robot/\": must not end with '/', unless it is exactly \
             \"/\" (at character 6)"
        );
    }

    #[test]
    fn limits_match_rule_text() {
        assert!(rule::NODE_TOO_LONG.contains(&MAX_NODE_NAME_LENGTH.to_string()));
        assert!(rule::NAMESPACE_TOO_LONG.contains(&MAX_NAMESPACE_LENGTH.to_string()));
        assert!(rule::TOPIC_TOO_LONG.contains(&MAX_TOPIC_NAME_LENGTH.to_string()));
    }

    #[test]
    fn valid_node_names() {
        let max = long("n", MAX_NODE_NAME_LENGTH);
        for name in [
            "talker",
            "a",
            "_",
            "_private",
            "node_1",
            "Node",
            "CamelCase42",
            "a1b2c3",
            "x_",
            "__double",
            "UPPER_CASE",
            "n0",
            max.as_str(),
        ] {
            assert_eq!(validate_node_name(name), Ok(()), "{name:?}");
        }
    }

    #[test]
    fn invalid_node_names() {
        let too_long = long("n", MAX_NODE_NAME_LENGTH + 1);
        let cases: &[(&str, &str, usize)] = &[
            ("", "must not be empty", 0),
            ("7up", "must not start with a number", 0),
            ("0", "must not start with a number", 0),
            ("my node", "must contain only alphanumerics and '_'", 2),
            (" node", "must contain only alphanumerics and '_'", 0),
            ("node ", "must contain only alphanumerics and '_'", 4),
            ("/talker", "must contain only alphanumerics and '_'", 0),
            ("ns/talker", "must contain only alphanumerics and '_'", 2),
            ("~talker", "must contain only alphanumerics and '_'", 0),
            ("talker~", "must contain only alphanumerics and '_'", 6),
            ("{node}", "must contain only alphanumerics and '_'", 0),
            ("my-node", "must contain only alphanumerics and '_'", 2),
            ("node.1", "must contain only alphanumerics and '_'", 4),
            ("nöde", "must contain only alphanumerics and '_'", 1),
            ("ロボット", "must contain only alphanumerics and '_'", 0),
            ("a\u{0}", "must contain only alphanumerics and '_'", 1),
            // Characters are checked before the leading digit, as in rmw.
            ("1-a", "must contain only alphanumerics and '_'", 1),
            (&too_long, "must not be longer than 255 characters", 255),
        ];
        for &(name, rule, index) in cases {
            assert_err(validate_node_name(name), NameKind::Node, name, rule, index);
        }
    }

    #[test]
    fn valid_namespaces() {
        let max = long("/n", MAX_NAMESPACE_LENGTH);
        for ns in [
            "/",
            "/robot",
            "/robot1/arm",
            "/_",
            "/a/b/c/d",
            "/a_1/b_2",
            "/Robot",
            "/r2d2",
            "/_9",
            "/a/_1",
            max.as_str(),
        ] {
            assert_eq!(validate_namespace(ns), Ok(()), "{ns:?}");
        }
    }

    #[test]
    fn invalid_namespaces() {
        let too_long = long("/n", MAX_NAMESPACE_LENGTH + 1);
        let cases: &[(&str, &str, usize)] = &[
            ("", "must not be empty", 0),
            ("robot", "must start with '/'", 0),
            ("~/robot", "must start with '/'", 0),
            (
                "/robot/",
                "must not end with '/', unless it is exactly \"/\"",
                6,
            ),
            ("//", "must not end with '/', unless it is exactly \"/\"", 1),
            ("//robot", "must not contain repeated '/'", 1),
            ("/a//b", "must not contain repeated '/'", 3),
            ("/1robot", "a token must not start with a number", 1),
            ("/robot/2arm", "a token must not start with a number", 7),
            (
                "/my robot",
                "must contain only alphanumerics, '_' and '/'",
                3,
            ),
            (
                "/robot-1",
                "must contain only alphanumerics, '_' and '/'",
                6,
            ),
            ("/a/~b", "must contain only alphanumerics, '_' and '/'", 3),
            ("/{ns}", "must contain only alphanumerics, '_' and '/'", 1),
            (
                "/rob\u{f6}t",
                "must contain only alphanumerics, '_' and '/'",
                4,
            ),
            (
                "/ロボット",
                "must contain only alphanumerics, '_' and '/'",
                1,
            ),
            ("/a.b", "must contain only alphanumerics, '_' and '/'", 2),
            (&too_long, "must not be longer than 253 characters", 253),
        ];
        for &(ns, rule, index) in cases {
            assert_err(validate_namespace(ns), NameKind::Namespace, ns, rule, index);
        }
    }

    #[test]
    fn normalize() {
        assert_eq!(normalize_namespace("").as_deref(), Ok("/"));
        assert_eq!(normalize_namespace("/").as_deref(), Ok("/"));
        assert_eq!(normalize_namespace("robot").as_deref(), Ok("/robot"));
        assert_eq!(
            normalize_namespace("robot/arm").as_deref(),
            Ok("/robot/arm")
        );
        assert_eq!(
            normalize_namespace("/robot/arm").as_deref(),
            Ok("/robot/arm")
        );
        // Errors quote the input and index into it.
        let cases: &[(&str, &str, usize)] = &[
            ("7robot", "a token must not start with a number", 0),
            (
                "robot/",
                "must not end with '/', unless it is exactly \"/\"",
                5,
            ),
            (
                "/robot/",
                "must not end with '/', unless it is exactly \"/\"",
                6,
            ),
            ("a//b", "must not contain repeated '/'", 2),
            (
                "my robot",
                "must contain only alphanumerics, '_' and '/'",
                2,
            ),
            (
                "/my robot",
                "must contain only alphanumerics, '_' and '/'",
                3,
            ),
        ];
        for &(ns, rule, index) in cases {
            assert_err(
                normalize_namespace(ns),
                NameKind::Namespace,
                ns,
                rule,
                index,
            );
        }
        // The limit applies to the normalised form.
        let fits = long("n", MAX_NAMESPACE_LENGTH - 1);
        assert_eq!(normalize_namespace(&fits), Ok(format!("/{fits}")));
        let too_long = long("n", MAX_NAMESPACE_LENGTH);
        assert_err(
            normalize_namespace(&too_long),
            NameKind::Namespace,
            &too_long,
            "must not be longer than 253 characters",
            252,
        );
    }

    #[test]
    fn valid_topic_names() {
        let very_long = long("t", 1000); // no limit before expansion
        for name in [
            "chatter",
            "/chatter",
            "foo/bar",
            "/foo/bar",
            "~",
            "~/foo",
            "~/foo/bar",
            "{node}",
            "{ns}/chatter",
            "{namespace}/chatter",
            "/{node}/chatter",
            "foo/{node}/bar",
            "foo_{node}_bar",
            "{node}{ns}",
            "~/{node}",
            "{_1}",
            "{custom_sub}",
            "_chatter",
            "a1/b2",
            "/_1",
            very_long.as_str(),
        ] {
            assert_eq!(
                validate_topic_name(name, NameKind::Topic),
                Ok(()),
                "{name:?}"
            );
            assert_eq!(
                validate_topic_name(name, NameKind::Service),
                Ok(()),
                "{name:?}"
            );
        }
    }

    #[test]
    fn invalid_topic_names() {
        const CHARS: &str = "must contain only alphanumerics, '_', '/', '~', '{' and '}'";
        const TOKEN: &str = "a token must not start with a number";
        const TILDE: &str = "'~' is only allowed as the first character";
        const BRACE: &str = "must not have unmatched curly braces";
        const SUB_CHARS: &str = "a substitution must contain only alphanumerics and '_'";
        let cases: &[(&str, &str, usize)] = &[
            ("", "must not be empty", 0),
            ("/", "must not end with '/'", 0),
            ("chatter/", "must not end with '/'", 7),
            ("/foo/bar/", "must not end with '/'", 8),
            ("~/", "must not end with '/'", 1),
            ("7chatter", TOKEN, 0),
            ("/7chatter", TOKEN, 1),
            ("foo/7bar", TOKEN, 4),
            ("~/7", TOKEN, 2),
            ("{node}/1", TOKEN, 7),
            ("foo//bar", "must not contain repeated '/'", 4),
            ("//foo", "must not contain repeated '/'", 1),
            ("~//foo", "must not contain repeated '/'", 2),
            ("foo~", TILDE, 3),
            ("foo/~/bar", TILDE, 4),
            ("/~", TILDE, 1),
            ("~~", TILDE, 1),
            ("~foo", "'~' must be followed by '/' or be alone", 1),
            ("~{node}", "'~' must be followed by '/' or be alone", 1),
            ("my topic", CHARS, 2),
            ("chatter ", CHARS, 7),
            ("foo-bar", CHARS, 3),
            ("foo.bar", CHARS, 3),
            ("tópico", CHARS, 1),
            ("話題", CHARS, 0),
            ("foo/bär", CHARS, 5),
            ("{node", BRACE, 0),
            ("foo/{node", BRACE, 4),
            ("node}", BRACE, 4),
            ("{a}b}", BRACE, 4),
            ("{}", "a substitution must not be empty", 0),
            ("foo/{}/bar", "a substitution must not be empty", 4),
            ("{{node}}", "substitutions must not be nested", 1),
            ("{a{b}}", "substitutions must not be nested", 2),
            ("{4node}", "a substitution must not start with a number", 1),
            ("{no de}", SUB_CHARS, 3),
            ("{a/b}", SUB_CHARS, 2),
            ("{~}", SUB_CHARS, 1),
            ("{nö}", SUB_CHARS, 2),
        ];
        for &(name, rule, index) in cases {
            for kind in [NameKind::Topic, NameKind::Service] {
                assert_err(validate_topic_name(name, kind), kind, name, rule, index);
            }
        }
    }

    #[test]
    fn expansion() {
        let cases: &[(&str, &str, &str, &str)] = &[
            // (name, node, namespace, expected)
            ("chatter", "talker", "/a", "/a/chatter"),
            ("chatter", "talker", "/", "/chatter"),
            ("foo/bar", "talker", "/a/b", "/a/b/foo/bar"),
            ("/chatter", "talker", "/a", "/chatter"),
            ("/foo/bar", "talker", "/", "/foo/bar"),
            ("~", "talker", "/a", "/a/talker"),
            ("~", "talker", "/", "/talker"),
            ("~/x", "talker", "/a", "/a/talker/x"),
            ("~/x/y", "talker", "/", "/talker/x/y"),
            ("{node}", "talker", "/a", "/a/talker"),
            ("{node}/x", "talker", "/", "/talker/x"),
            ("/{node}/x", "talker", "/a", "/talker/x"),
            ("foo_{node}_bar", "talker", "/a", "/a/foo_talker_bar"),
            ("{ns}", "talker", "/a/b", "/a/b"),
            ("{ns}/chatter", "talker", "/a", "/a/chatter"),
            ("{ns}/chatter", "talker", "/", "/chatter"),
            ("{namespace}/chatter", "talker", "/a", "/a/chatter"),
            ("{namespace}/chatter", "talker", "/", "/chatter"),
            ("{ns}/{node}/x", "talker", "/a", "/a/talker/x"),
            ("{ns}/{node}/x", "talker", "/", "/talker/x"),
            ("~/{node}", "talker", "/a", "/a/talker/talker"),
            ("{node}{node}", "t", "/", "/tt"),
        ];
        for &(name, node, ns, expected) in cases {
            for kind in [NameKind::Topic, NameKind::Service] {
                assert_eq!(
                    expand_topic_name(name, node, ns, kind).as_deref(),
                    Ok(expected),
                    "{name:?} in {ns:?} for {node:?}"
                );
            }
        }
        // The longest allowed result.
        let name = long("t", MAX_TOPIC_NAME_LENGTH - 3);
        let expanded = expand_topic_name(&name, "n", "/a", NameKind::Topic).unwrap();
        assert_eq!(expanded.len(), MAX_TOPIC_NAME_LENGTH);
    }

    #[test]
    fn expansion_errors_input() {
        let k = NameKind::Topic;
        // Invalid input name.
        assert_err(
            expand_topic_name("foo//bar", "n", "/a", k),
            k,
            "foo//bar",
            "must not contain repeated '/'",
            4,
        );
        assert_err(
            expand_topic_name("a/~b", "n", "/a", NameKind::Service),
            NameKind::Service,
            "a/~b",
            "'~' is only allowed as the first character",
            2,
        );
        assert_err(
            expand_topic_name("", "n", "/", k),
            k,
            "",
            "must not be empty",
            0,
        );
        // Invalid node name or namespace.
        assert_err(
            expand_topic_name("chatter", "7n", "/a", k),
            NameKind::Node,
            "7n",
            "must not start with a number",
            0,
        );
        assert_err(
            expand_topic_name("chatter", "n", "a", k),
            NameKind::Namespace,
            "a",
            "must start with '/'",
            0,
        );
        assert_err(
            expand_topic_name("chatter", "n", "", k),
            NameKind::Namespace,
            "",
            "must not be empty",
            0,
        );
    }

    #[test]
    fn expansion_errors_substitution() {
        const UNKNOWN: &str = "unknown substitution (expected {node}, {ns} or {namespace})";
        let k = NameKind::Topic;
        // Unknown substitutions, reported at their '{' in the input name.
        assert_err(
            expand_topic_name("{foo}", "n", "/a", k),
            k,
            "{foo}",
            UNKNOWN,
            0,
        );
        assert_err(
            expand_topic_name("~/{node}/{robot}", "n", "/a", k),
            k,
            "~/{node}/{robot}",
            UNKNOWN,
            9,
        );
        assert_err(
            expand_topic_name("{Node}", "n", "/a", k),
            k,
            "{Node}",
            UNKNOWN,
            0,
        );
        let err = expand_topic_name("a/{robot}", "n", "/", k).unwrap_err();
        assert!(err.to_string().contains("{robot}"), "{err}");
    }

    #[test]
    fn expansion_errors_result() {
        let k = NameKind::Topic;
        // Results that are not valid fully qualified names quote the expanded name.
        assert_err(
            expand_topic_name("foo/{ns}", "n", "/a", k),
            k,
            "/a/foo//a",
            "must not contain repeated '/'",
            7,
        );
        assert_err(
            expand_topic_name("{ns}", "n", "/", k),
            k,
            "/",
            "must not end with '/'",
            0,
        );
        assert_err(
            expand_topic_name("a{ns}", "n", "/", k),
            k,
            "/a/",
            "must not end with '/'",
            2,
        );
        let name = long("t", MAX_TOPIC_NAME_LENGTH - 2);
        assert_err(
            expand_topic_name(&name, "n", "/a", k),
            k,
            &format!("/a/{name}"),
            "must not be longer than 255 characters",
            255,
        );
        let node = long("n", MAX_NODE_NAME_LENGTH);
        let expected = format!("/ns/{node}/x");
        assert_err(
            expand_topic_name("~/x", &node, "/ns", NameKind::Service),
            NameKind::Service,
            &expected,
            "must not be longer than 255 characters",
            255,
        );
    }

    #[test]
    fn fqn() {
        assert_eq!(node_fqn("/", "talker"), "/talker");
        assert_eq!(node_fqn("", "talker"), "/talker");
        assert_eq!(node_fqn("/a", "talker"), "/a/talker");
        assert_eq!(node_fqn("/a/b", "talker"), "/a/b/talker");
    }
}

// ------------------------------------------------------------- remapping

/// ROS 2's remapping rules (`--ros-args -r [node:]from:=to`): node names
/// (`__node:=`), namespaces (`__ns:=`), topic and service names. Rules
/// apply in the order given; the first that matches wins, as in rcl. A
/// rule `node:from:=to` applies only to the node created as `node`.
#[derive(Debug, Clone, Default)]
pub(crate) struct Remaps {
    rules: Vec<Remap>,
}

#[derive(Debug, Clone)]
struct Remap {
    /// Only for the node created with this name.
    node: Option<String>,
    from: String,
    to: String,
}

impl Remaps {
    /// Add `[node:]from:=to`, checked.
    pub(crate) fn add_arg(&mut self, arg: &str) -> Result<(), String> {
        let (lhs, to) = arg
            .split_once(":=")
            .ok_or_else(|| format!("-r {arg:?}: expected from:=to or node:from:=to"))?;
        // A node prefix is what stands before the last ':' of the left
        // side (topic names have none).
        let (node, from) = match lhs.rsplit_once(':') {
            Some((node, from)) => {
                validate_node_name(node).map_err(|e| format!("-r {arg:?}: {e}"))?;
                (Some(node.to_string()), from)
            }
            None => (None, lhs),
        };
        match from {
            "__node" | "__name" => {
                validate_node_name(to).map_err(|e| format!("-r {arg:?}: {e}"))?;
            }
            "__ns" => {
                normalize_namespace(to).map_err(|e| format!("-r {arg:?}: {e}"))?;
            }
            _ => {
                validate_topic_name(from, NameKind::Topic)
                    .and_then(|()| validate_topic_name(to, NameKind::Topic))
                    .map_err(|e| format!("-r {arg:?}: {e}"))?;
            }
        }
        self.rules.push(Remap {
            node: node.filter(|n| !n.is_empty()),
            from: if from == "__name" {
                "__node".into()
            } else {
                from.to_string()
            },
            to: to.to_string(),
        });
        Ok(())
    }

    fn for_node<'a>(&'a self, original: &'a str) -> impl Iterator<Item = &'a Remap> + 'a {
        self.rules
            .iter()
            .filter(move |r| r.node.as_deref().is_none_or(|n| n == original))
    }

    /// The name and namespace a node created as (`name`, `namespace`)
    /// gets.
    pub(crate) fn node(&self, name: &str, namespace: &str) -> (String, String) {
        let new_name = self
            .for_node(name)
            .find(|r| r.from == "__node")
            .map_or(name, |r| r.to.as_str());
        let new_ns = self
            .for_node(name)
            .find(|r| r.from == "__ns")
            .map_or(namespace, |r| r.to.as_str());
        (new_name.to_string(), new_ns.to_string())
    }

    /// `expanded` (a topic or service name of the node created as
    /// `original`, now `node_name` in `namespace`) after the first rule
    /// that matches it.
    pub(crate) fn name(
        &self,
        expanded: String,
        original: &str,
        node_name: &str,
        namespace: &str,
        kind: NameKind,
    ) -> String {
        for r in self.for_node(original) {
            if r.from == "__node" || r.from == "__ns" {
                continue;
            }
            let Ok(from) = expand_topic_name(&r.from, node_name, namespace, kind) else {
                continue;
            };
            if from == expanded
                && let Ok(to) = expand_topic_name(&r.to, node_name, namespace, kind)
            {
                return to;
            }
        }
        expanded
    }
}

#[cfg(test)]
mod remap_tests {
    use super::*;

    #[test]
    fn remapping_follows_rcl() {
        let mut r = Remaps::default();
        for a in [
            "chatter:=talk",
            "/abs:=/elsewhere",
            "camera:image:=image_raw",
            "camera:__node:=cam0",
            "__ns:=/robot1",
        ] {
            r.add_arg(a).unwrap();
        }
        assert_eq!(r.node("camera", "/"), ("cam0".into(), "/robot1".into()));
        assert_eq!(r.node("talker", "/x"), ("talker".into(), "/robot1".into()));
        let topic = |orig: &str, node: &str, ns: &str, t: &str| {
            let e = expand_topic_name(t, node, ns, NameKind::Topic).unwrap();
            r.name(e, orig, node, ns, NameKind::Topic)
        };
        assert_eq!(
            topic("talker", "talker", "/robot1", "chatter"),
            "/robot1/talk"
        );
        assert_eq!(topic("talker", "talker", "/robot1", "/abs"), "/elsewhere");
        assert_eq!(
            topic("camera", "cam0", "/robot1", "image"),
            "/robot1/image_raw"
        );
        assert_eq!(
            topic("talker", "talker", "/robot1", "image"),
            "/robot1/image"
        );
        for bad in [
            "nothing",
            "a b:=c",
            "x:=",
            "bad node:a:=b",
            "__ns:=not valid",
        ] {
            assert!(Remaps::default().add_arg(bad).is_err(), "{bad}");
        }
    }
}
