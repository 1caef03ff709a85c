//! Liveliness tokens: the graph as rmw_zenoh declares it.
//!
//! Every node, publisher, subscription, service server and client declares
//! one zenoh liveliness token whose key expression describes it:
//!
//! ```text
//! @ros2_lv/<domain>/<zid>/<nid>/<eid>/<kind>/<enclave>/<namespace>/<node>[/<topic>/<type>/<hash>/<qos>]
//! ```
//!
//! `kind` is `NN` (node), `MP` (publisher), `MS` (subscription), `SS`
//! (service server) or `SC` (client). Every `/` inside a name becomes `%`
//! and an empty name (the root namespace, no enclave) is written `%`. The
//! QoS field is `reliability:durability:history,depth:deadline:lifespan:liveliness,lease`
//! with durations as `seconds,nanoseconds` and rmw's enum values (reliable
//! 1, best effort 2; transient local 1, volatile 2; keep last 1, keep all
//! 2; automatic 1, manual by topic 3). rmw_zenoh leaves a field empty when
//! it has its default value; myelin writes every field and reads both.
//!
//! zenoh removes a token when its session closes or its lease expires, so
//! a process that dies disappears from everyone's graph on its own.

use std::time::Duration;

use crate::Error;

/// The prefix of every liveliness token.
pub const PREFIX: &str = "@ros2_lv";

/// What a token describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EntityKind {
    /// A node (`NN`).
    Node,
    /// A publisher (`MP`).
    Publisher,
    /// A subscription (`MS`).
    Subscription,
    /// A service server (`SS`).
    ServiceServer,
    /// A service client (`SC`).
    ServiceClient,
}

impl EntityKind {
    /// The two-letter code.
    pub fn code(self) -> &'static str {
        match self {
            EntityKind::Node => "NN",
            EntityKind::Publisher => "MP",
            EntityKind::Subscription => "MS",
            EntityKind::ServiceServer => "SS",
            EntityKind::ServiceClient => "SC",
        }
    }

    fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "NN" => EntityKind::Node,
            "MP" => EntityKind::Publisher,
            "MS" => EntityKind::Subscription,
            "SS" => EntityKind::ServiceServer,
            "SC" => EntityKind::ServiceClient,
            _ => return None,
        })
    }
}

/// The QoS of a topic endpoint as a token carries it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TokenQos {
    /// Reliable (`true`) or best effort.
    pub reliable: bool,
    /// Transient local (`true`) or volatile.
    pub transient_local: bool,
    /// Keep all (`true`) or keep last `depth`.
    pub keep_all: bool,
    /// The history depth.
    pub depth: u64,
    /// The deadline (`None`: infinite).
    pub deadline: Option<Duration>,
    /// The lifespan (`None`: infinite).
    pub lifespan: Option<Duration>,
    /// Manual-by-topic liveliness (`true`) or automatic.
    pub manual_by_topic: bool,
    /// The liveliness lease (`None`: infinite).
    pub lease: Option<Duration>,
}

impl Default for TokenQos {
    /// rmw_zenoh's defaults (what an empty field means).
    fn default() -> Self {
        TokenQos {
            reliable: true,
            transient_local: false,
            keep_all: false,
            depth: 42,
            deadline: None,
            lifespan: None,
            manual_by_topic: false,
            lease: None,
        }
    }
}

/// rmw's "infinite" duration: `9223372036,854775807`.
const INF_S: u64 = 9_223_372_036;
const INF_NS: u64 = 854_775_807;

fn parse_dur(s: &str) -> Option<Option<Duration>> {
    if s.is_empty() {
        return Some(None);
    }
    let (a, b) = s.split_once(',')?;
    let sec: u64 = if a.is_empty() { INF_S } else { a.parse().ok()? };
    let ns: u64 = if b.is_empty() {
        INF_NS
    } else {
        b.parse().ok()?
    };
    if sec >= INF_S || (sec == 0 && ns == 0) {
        return Some(None);
    }
    Some(Some(
        Duration::from_secs(sec) + Duration::from_nanos(ns.min(999_999_999)),
    ))
}

impl TokenQos {
    /// The token field, as rmw_zenoh writes it: a value equal to
    /// rmw_zenoh's default is left empty (the default QoS with depth 10 is
    /// `::,10:,:,:,,`).
    pub fn encode(&self) -> String {
        let d = TokenQos::default();
        let f = |differs: bool, v: String| if differs { v } else { String::new() };
        let dur = |v: Option<Duration>| match v {
            None => ",".to_string(),
            Some(d) => format!("{},{}", d.as_secs(), d.subsec_nanos()),
        };
        format!(
            "{}:{}:{},{}:{}:{}:{},{}",
            f(self.reliable != d.reliable, "2".into()),
            f(self.transient_local != d.transient_local, "1".into()),
            f(self.keep_all != d.keep_all, "2".into()),
            f(self.depth != d.depth, self.depth.to_string()),
            dur(self.deadline),
            dur(self.lifespan),
            f(self.manual_by_topic != d.manual_by_topic, "3".into()),
            dur(self.lease),
        )
    }

    /// Read the token field (empty parts take rmw_zenoh's defaults).
    pub fn decode(s: &str) -> Option<TokenQos> {
        let f: Vec<&str> = s.split(':').collect();
        let [rel, dura, hist, deadline, lifespan, live] = f.as_slice() else {
            return None;
        };
        let d = TokenQos::default();
        let num = |s: &str, default: u64| -> Option<u64> {
            if s.is_empty() {
                Some(default)
            } else {
                s.parse().ok()
            }
        };
        let (hk, depth) = hist.split_once(',').unwrap_or((hist, ""));
        let (lk, lease) = live.split_once(',').unwrap_or((live, ""));
        Some(TokenQos {
            reliable: num(rel, 1)? != 2,
            transient_local: num(dura, 2)? == 1,
            keep_all: num(hk, 1)? == 2,
            depth: num(depth, d.depth)?,
            deadline: parse_dur(deadline)?,
            lifespan: parse_dur(lifespan)?,
            manual_by_topic: num(lk, 1)? == 3,
            lease: parse_dur(lease)?,
        })
    }
}

/// The topic part of an endpoint's token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicInfo {
    /// The fully qualified topic (or service) name, e.g. `/chatter`.
    pub name: String,
    /// The DDS-mangled type name (`std_msgs::msg::dds_::String_`).
    pub type_name: String,
    /// The type hash chunk (`RIHS01_...`).
    pub type_hash: String,
    /// The QoS.
    pub qos: TokenQos,
}

/// One liveliness token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Token {
    /// The domain id.
    pub domain: u32,
    /// The zenoh session id (hex).
    pub zid: String,
    /// The node id within the session.
    pub nid: u64,
    /// The entity id within the session (the node's own id for `NN`).
    pub eid: u64,
    /// What it is.
    pub kind: EntityKind,
    /// The security enclave (empty: none).
    pub enclave: String,
    /// The node's namespace (`/` for the root).
    pub namespace: String,
    /// The node's name.
    pub node: String,
    /// Topic, type and QoS (endpoints only).
    pub topic: Option<TopicInfo>,
}

/// `/a/b` -> `%a%b`; empty or `/` -> `%`.
pub fn mangle(name: &str) -> String {
    if name.is_empty() {
        "%".to_string()
    } else {
        name.replace('/', "%")
    }
}

/// `%a%b` -> `/a/b`; `%` -> `/` (a namespace) — see [`Token::parse`].
fn demangle(chunk: &str) -> String {
    chunk.replace('%', "/")
}

impl Token {
    /// The key expression to declare.
    pub fn key(&self) -> String {
        let ns = if self.namespace == "/" {
            String::new()
        } else {
            self.namespace.clone()
        };
        let mut k = format!(
            "{PREFIX}/{}/{}/{}/{}/{}/{}/{}/{}",
            self.domain,
            self.zid,
            self.nid,
            self.eid,
            self.kind.code(),
            mangle(&self.enclave),
            mangle(&ns),
            mangle(&self.node),
        );
        if let Some(t) = &self.topic {
            k.push_str(&format!(
                "/{}/{}/{}/{}",
                mangle(&t.name),
                t.type_name,
                t.type_hash,
                t.qos.encode()
            ));
        }
        k
    }

    /// Read a token's key expression (zenoh may deliver it with an
    /// `@/liveliness/` prefix, which is skipped).
    pub fn parse(key: &str) -> Result<Token, Error> {
        let bad = |why: &'static str| Error::Token {
            key: key.to_string(),
            why,
        };
        let start = key.find(PREFIX).ok_or_else(|| bad("no @ros2_lv prefix"))?;
        let parts: Vec<&str> = key[start..].split('/').collect();
        if parts.len() != 9 && parts.len() != 13 {
            return Err(bad("expected 9 (node) or 13 (endpoint) chunks"));
        }
        let kind = EntityKind::parse(parts[5]).ok_or_else(|| bad("unknown entity kind"))?;
        let name_or_empty = |c: &str| if c == "%" { String::new() } else { demangle(c) };
        let namespace = match parts[7] {
            "%" => "/".to_string(),
            c => demangle(c),
        };
        let topic = if parts.len() == 13 {
            if kind == EntityKind::Node {
                return Err(bad("a node token has no topic"));
            }
            Some(TopicInfo {
                name: demangle(parts[9]),
                type_name: parts[10].to_string(),
                type_hash: parts[11].to_string(),
                qos: TokenQos::decode(parts[12]).ok_or_else(|| bad("unreadable QoS field"))?,
            })
        } else {
            if kind != EntityKind::Node {
                return Err(bad("an endpoint token needs topic, type, hash and QoS"));
            }
            None
        };
        Ok(Token {
            domain: parts[1]
                .parse()
                .map_err(|_| bad("domain is not a number"))?,
            zid: parts[2].to_string(),
            nid: parts[3]
                .parse()
                .map_err(|_| bad("node id is not a number"))?,
            eid: parts[4]
                .parse()
                .map_err(|_| bad("entity id is not a number"))?,
            kind,
            enclave: name_or_empty(parts[6]),
            namespace,
            node: demangle(parts[8]),
            topic,
        })
    }

    /// The fully qualified node name (`/ns/node`).
    pub fn node_fqn(&self) -> String {
        if self.namespace == "/" {
            format!("/{}", self.node)
        } else {
            format!("{}/{}", self.namespace, self.node)
        }
    }
}

/// The key expression matching every token of a domain.
pub fn domain_tokens(domain: u32) -> String {
    format!("{PREFIX}/{domain}/**")
}

/// The key expression matching the tokens of every endpoint on `topic`
/// (publishers, subscriptions, and services and clients of that name) in
/// a domain, and nothing else: a process follows only the topics it has
/// endpoints on, so the router sends it only their changes.
pub fn topic_tokens(domain: u32, topic: &str) -> String {
    format!("{PREFIX}/{domain}/*/*/*/*/*/*/*/{}/**", mangle(topic))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topic_tokens_match_the_topics_endpoints_and_nothing_else() {
        use zenoh::key_expr::KeyExpr;
        let on = |topic: &str, kind: EntityKind| Token {
            domain: 3,
            zid: "1234".into(),
            nid: 1,
            eid: 7,
            kind,
            enclave: String::new(),
            namespace: "/robot".into(),
            node: "cam".into(),
            topic: Some(TopicInfo {
                name: topic.into(),
                type_name: "std_msgs::msg::dds_::String_".into(),
                type_hash: "RIHS01_abc".into(),
                qos: TokenQos::default(),
            }),
        };
        let follow = KeyExpr::try_from(topic_tokens(3, "/robot/image")).unwrap();
        let hit = |t: &Token| follow.intersects(&KeyExpr::try_from(t.key()).unwrap());
        assert!(hit(&on("/robot/image", EntityKind::Publisher)));
        assert!(hit(&on("/robot/image", EntityKind::Subscription)));
        assert!(!hit(&on("/robot/image_raw", EntityKind::Publisher)));
        assert!(!hit(&on("/robot", EntityKind::Publisher)));
        let mut other_domain = on("/robot/image", EntityKind::Publisher);
        other_domain.domain = 4;
        assert!(!hit(&other_domain));
        let mut node = on("/robot/image", EntityKind::Node);
        node.topic = None;
        assert!(!hit(&node));
    }

    #[test]
    fn reads_a_real_rmw_zenoh_token() {
        // From a 2024 rmw_zenoh log (ros2/rmw_zenoh#263).
        let k = "@ros2_lv/1/aac3178e146ba6f1fc6e6a4085e77f21/0/11/MS/%/%/subscription_test/%test_topic/std_msgs::msg::dds_::String_/RIHS01_df668c740482bbd48fb39d76a70dfd4bd59db1288021743503259e948f6b1a18/1:1:1,10:9223372036,854775807:9223372036,854775807:1,9223372036,854775807";
        let t = Token::parse(k).unwrap();
        assert_eq!(t.domain, 1);
        assert_eq!(t.kind, EntityKind::Subscription);
        assert_eq!(t.namespace, "/");
        assert_eq!(t.node, "subscription_test");
        assert_eq!(t.node_fqn(), "/subscription_test");
        let topic = t.topic.as_ref().unwrap();
        assert_eq!(topic.name, "/test_topic");
        assert_eq!(topic.type_name, "std_msgs::msg::dds_::String_");
        assert_eq!(
            topic.qos,
            TokenQos {
                reliable: true,
                transient_local: true,
                keep_all: false,
                depth: 10,
                deadline: None,
                lifespan: None,
                manual_by_topic: false,
                lease: None
            }
        );
        // Written back the way rmw_zenoh writes it today (defaults empty).
        assert!(t.key().ends_with("/:1:,10:,:,:,,"), "{}", t.key());
        assert_eq!(Token::parse(&t.key()).unwrap(), t);
        // zenoh's internal prefix is skipped.
        assert_eq!(Token::parse(&format!("@/liveliness/{k}")).unwrap(), t);
    }

    #[test]
    fn writes_defaults_empty() {
        let q = TokenQos {
            depth: 10,
            ..TokenQos::default()
        };
        assert_eq!(q.encode(), "::,10:,:,:,,");
        let q = TokenQos {
            reliable: false,
            depth: 5,
            ..TokenQos::default()
        };
        assert_eq!(q.encode(), "2::,5:,:,:,,");
        let q = TokenQos {
            keep_all: true,
            deadline: Some(Duration::from_millis(1500)),
            manual_by_topic: true,
            ..TokenQos::default()
        };
        assert_eq!(q.encode(), "::2,:1,500000000:,:3,,");
        assert_eq!(TokenQos::decode(&q.encode()), Some(q));
    }

    #[test]
    fn empty_qos_fields_take_defaults() {
        let q = TokenQos::decode("::,:,:,:,,").unwrap();
        assert_eq!(q, TokenQos::default());
        let q = TokenQos::decode("2::,5:1,500:,:3,2,0").unwrap();
        assert!(!q.reliable && q.depth == 5);
        assert_eq!(q.deadline, Some(Duration::from_nanos(1_000_000_500)));
        assert!(q.manual_by_topic);
        assert_eq!(q.lease, Some(Duration::from_secs(2)));
        assert!(TokenQos::decode("1:1").is_none());
        assert!(TokenQos::decode("x:1:1,1:,:,:1,").is_none());
    }

    #[test]
    fn node_tokens_and_namespaces() {
        let t = Token {
            domain: 0,
            zid: "ab".into(),
            nid: 3,
            eid: 3,
            kind: EntityKind::Node,
            enclave: String::new(),
            namespace: "/robot1/arm".into(),
            node: "ctl".into(),
            topic: None,
        };
        assert_eq!(t.key(), "@ros2_lv/0/ab/3/3/NN/%/%robot1%arm/ctl");
        assert_eq!(Token::parse(&t.key()).unwrap(), t);
        assert_eq!(t.node_fqn(), "/robot1/arm/ctl");
        assert!(Token::parse("@ros2_lv/0/ab/3/3/MP/%/%/ctl").is_err());
        assert!(Token::parse("@ros2_lv/x/ab/3/3/NN/%/%/ctl").is_err());
        assert!(Token::parse("0/chatter/a/b").is_err());
    }
}
