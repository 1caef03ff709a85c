//! ROS 2 `.msg` definitions and their REP 2011 type hashes (`RIHS01_...`).
//!
//! [`parse_msg`] reads a `.msg` file the way `rosidl_adapter` does:
//! `#` comments, blank lines, fields `TYPE NAME [DEFAULT]` and constants
//! `TYPE NAME=VALUE`. Types are the primitives (`bool byte char float32
//! float64 int8 uint8 int16 uint16 int32 uint32 int64 uint64 string
//! wstring`), bounded strings `string<=N`, fixed arrays `T[N]`, unbounded
//! sequences `T[]`, bounded sequences `T[<=N]` and other messages,
//! `pkg/Name` or `Name` (same package; a bare `Header` is
//! `std_msgs/Header`, as in ROS 1 files).
//!
//! [`type_hash`] computes the ROS 2 type hash of a message and of the
//! messages it references, as `rosidl_generator_type_description` does:
//! SHA-256 over the JSON type description (field names and types, no
//! constants, no defaults, no comments). ROS 2 nodes and `rmw_zenoh` match
//! topics by it.
//!
//! ```
//! use myelin_msgs::idl::{parse_msg, type_hash};
//!
//! let spec = parse_msg("std_msgs", "String", "string data").unwrap();
//! let hash = type_hash("std_msgs/msg/String", |name| {
//!     (name == "std_msgs/msg/String").then(|| spec.clone())
//! })
//! .unwrap();
//! assert_eq!(
//!     hash,
//!     "RIHS01_df668c740482bbd48fb39d76a70dfd4bd59db1288021743503259e948f6b1a18"
//! );
//! ```

use std::collections::{BTreeMap, HashSet};
use std::fmt::{self, Write as _};

use sha2::{Digest, Sha256};

/// The member ROS 2 gives a message without fields (IDL structures need
/// one), a `uint8`. It is part of the type hash and of the CDR encoding.
pub const EMPTY_STRUCT_MEMBER: &str = "structure_needs_at_least_one_member";

/// A primitive `.msg` type (strings included, bounded strings are
/// [`BaseType::BoundedString`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Primitive {
    /// `bool`
    Bool,
    /// `byte` (an IDL `octet`)
    Byte,
    /// `char` (in ROS 2, an unsigned 8-bit integer: hashed as `uint8`)
    Char,
    /// `float32`
    Float32,
    /// `float64`
    Float64,
    /// `int8`
    Int8,
    /// `uint8`
    UInt8,
    /// `int16`
    Int16,
    /// `uint16`
    UInt16,
    /// `int32`
    Int32,
    /// `uint32`
    UInt32,
    /// `int64`
    Int64,
    /// `uint64`
    UInt64,
    /// `string` (unbounded)
    String,
    /// `wstring` (unbounded)
    WString,
}

impl Primitive {
    const ALL: [Primitive; 15] = [
        Primitive::Bool,
        Primitive::Byte,
        Primitive::Char,
        Primitive::Float32,
        Primitive::Float64,
        Primitive::Int8,
        Primitive::UInt8,
        Primitive::Int16,
        Primitive::UInt16,
        Primitive::Int32,
        Primitive::UInt32,
        Primitive::Int64,
        Primitive::UInt64,
        Primitive::String,
        Primitive::WString,
    ];

    /// The type's name in a `.msg` file (`uint8`, `string`, ...).
    pub fn msg_name(self) -> &'static str {
        match self {
            Primitive::Bool => "bool",
            Primitive::Byte => "byte",
            Primitive::Char => "char",
            Primitive::Float32 => "float32",
            Primitive::Float64 => "float64",
            Primitive::Int8 => "int8",
            Primitive::UInt8 => "uint8",
            Primitive::Int16 => "int16",
            Primitive::UInt16 => "uint16",
            Primitive::Int32 => "int32",
            Primitive::UInt32 => "uint32",
            Primitive::Int64 => "int64",
            Primitive::UInt64 => "uint64",
            Primitive::String => "string",
            Primitive::WString => "wstring",
        }
    }

    /// The primitive named `name` in a `.msg` file.
    pub fn from_msg_name(name: &str) -> Option<Primitive> {
        Primitive::ALL.into_iter().find(|p| p.msg_name() == name)
    }

    /// `type_description_interfaces/msg/FieldType` id of the single value.
    fn type_id(self) -> u64 {
        match self {
            Primitive::Int8 => 2,
            // rosidl_adapter turns a .msg `char` into an IDL `uint8`.
            Primitive::UInt8 | Primitive::Char => 3,
            Primitive::Int16 => 4,
            Primitive::UInt16 => 5,
            Primitive::Int32 => 6,
            Primitive::UInt32 => 7,
            Primitive::Int64 => 8,
            Primitive::UInt64 => 9,
            Primitive::Float32 => 10,
            Primitive::Float64 => 11,
            Primitive::Bool => 15,
            Primitive::Byte => 16,
            Primitive::String => 17,
            Primitive::WString => 18,
        }
    }

    /// Integer range of the integer types.
    fn int_range(self) -> Option<(i128, i128)> {
        Some(match self {
            Primitive::Byte | Primitive::Char | Primitive::UInt8 => (0, u8::MAX.into()),
            Primitive::Int8 => (i8::MIN.into(), i8::MAX.into()),
            Primitive::Int16 => (i16::MIN.into(), i16::MAX.into()),
            Primitive::UInt16 => (0, u16::MAX.into()),
            Primitive::Int32 => (i32::MIN.into(), i32::MAX.into()),
            Primitive::UInt32 => (0, u32::MAX.into()),
            Primitive::Int64 => (i64::MIN.into(), i64::MAX.into()),
            Primitive::UInt64 => (0, u64::MAX.into()),
            _ => return None,
        })
    }
}

impl fmt::Display for Primitive {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.msg_name())
    }
}

/// The type of one value of a field.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum BaseType {
    /// A primitive.
    Primitive(Primitive),
    /// `string<=N`: at most N characters.
    BoundedString(u64),
    /// `wstring<=N`: at most N characters.
    BoundedWString(u64),
    /// Another message.
    Nested {
        /// Its package.
        package: String,
        /// Where it is defined: a `.msg` file, or a service's own part
        /// (`pkg/srv/Name_Request` in a service's event message).
        kind: InterfaceKind,
        /// Its name.
        name: String,
    },
}

/// The kind of interface file a message type comes from, the middle part
/// of its type name (`pkg/msg/Name`, `pkg/srv/Name_Request`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum InterfaceKind {
    /// A `.msg` file.
    #[default]
    Msg,
    /// A part of a `.srv` file (its request, response, event, or the
    /// service itself).
    Srv,
    /// A part of an `.action` file (its goal, result, feedback, the two
    /// services and the feedback message derived from them, or the action
    /// itself).
    Action,
}

impl InterfaceKind {
    /// `msg` or `srv`.
    pub fn as_str(self) -> &'static str {
        match self {
            InterfaceKind::Msg => "msg",
            InterfaceKind::Srv => "srv",
            InterfaceKind::Action => "action",
        }
    }
}

impl BaseType {
    /// `pkg/msg/Name` (or `pkg/srv/Name`) of a nested message.
    pub fn nested_type_name(&self) -> Option<String> {
        match self {
            BaseType::Nested {
                package,
                kind,
                name,
            } => Some(format!("{package}/{}/{name}", kind.as_str())),
            _ => None,
        }
    }
}

impl fmt::Display for BaseType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BaseType::Primitive(p) => write!(f, "{p}"),
            BaseType::BoundedString(n) => write!(f, "string<={n}"),
            BaseType::BoundedWString(n) => write!(f, "wstring<={n}"),
            BaseType::Nested {
                package,
                kind: InterfaceKind::Msg,
                name,
            } => write!(f, "{package}/{name}"),
            BaseType::Nested {
                package,
                kind: kind @ (InterfaceKind::Srv | InterfaceKind::Action),
                name,
            } => write!(f, "{package}/{}/{name}", kind.as_str()),
        }
    }
}

/// How many values a field holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Collection {
    /// One value: `T`.
    Single,
    /// Exactly N values: `T[N]`.
    Array(u64),
    /// At most N values: `T[<=N]`.
    BoundedSequence(u64),
    /// Any number of values: `T[]`.
    UnboundedSequence,
}

/// The type of a field.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct FieldType {
    /// The type of each value.
    pub base: BaseType,
    /// How many values.
    pub collection: Collection,
}

impl fmt::Display for FieldType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.base)?;
        match self.collection {
            Collection::Single => Ok(()),
            Collection::Array(n) => write!(f, "[{n}]"),
            Collection::BoundedSequence(n) => write!(f, "[<={n}]"),
            Collection::UnboundedSequence => f.write_str("[]"),
        }
    }
}

/// A field of a message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Field {
    /// Its name.
    pub name: String,
    /// Its type.
    pub ty: FieldType,
    /// Its default value as written (checked against the type; not part of
    /// the type hash).
    pub default: Option<String>,
}

/// A constant of a message (not part of the type hash).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Constant {
    /// Its type.
    pub ty: Primitive,
    /// Its name.
    pub name: String,
    /// Its value as written (checked against the type).
    pub value: String,
}

/// A parsed `.msg` file (or one message of a `.srv` file).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MsgSpec {
    /// The package (`std_msgs`).
    pub package: String,
    /// `msg`, or `srv` for the messages of a service.
    pub kind: InterfaceKind,
    /// The message name (`Header`, `AddTwoInts_Request`).
    pub name: String,
    /// The fields, in order. Empty for an empty message (whose type
    /// description and CDR encoding have [`EMPTY_STRUCT_MEMBER`]).
    pub fields: Vec<Field>,
    /// The constants, in order.
    pub constants: Vec<Constant>,
}

impl MsgSpec {
    /// `pkg/msg/Name` (`pkg/srv/Name_Request` for a service's request).
    pub fn type_name(&self) -> String {
        format!("{}/{}/{}", self.package, self.kind.as_str(), self.name)
    }
}

/// A parsed `.srv` file: a request and a response message (or one of the
/// two services an action implies: `kind` is then
/// [`InterfaceKind::Action`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SrvSpec {
    /// The package (`example_interfaces`).
    pub package: String,
    /// `srv`, or `action` for an action's `_SendGoal` and `_GetResult`.
    pub kind: InterfaceKind,
    /// The service name (`AddTwoInts`).
    pub name: String,
    /// `pkg/srv/Name_Request`: the part above `---`.
    pub request: MsgSpec,
    /// `pkg/srv/Name_Response`: the part below `---`.
    pub response: MsgSpec,
}

/// The message every service event carries (`service_msgs`, REP 2016's
/// service introspection), part of every service's type description.
pub const SERVICE_EVENT_INFO: &str = "service_msgs/msg/ServiceEventInfo";

impl SrvSpec {
    /// `pkg/srv/Name` (`pkg/action/Name_SendGoal` for an action's).
    pub fn type_name(&self) -> String {
        format!("{}/{}/{}", self.package, self.kind.as_str(), self.name)
    }

    fn part(&self, suffix: &str) -> BaseType {
        BaseType::Nested {
            package: self.package.clone(),
            kind: self.kind,
            name: format!("{}_{suffix}", self.name),
        }
    }

    /// `pkg/srv/Name_Event`, the message service introspection publishes:
    /// `info` (`service_msgs/msg/ServiceEventInfo`) and at most one
    /// request and one response.
    pub fn event(&self) -> MsgSpec {
        let field = |name: &str, base: BaseType, collection| Field {
            name: name.to_owned(),
            ty: FieldType { base, collection },
            default: None,
        };
        let (pkg, info) = split_type_name(SERVICE_EVENT_INFO).expect("a message type name");
        MsgSpec {
            package: self.package.clone(),
            kind: self.kind,
            name: format!("{}_Event", self.name),
            fields: vec![
                field(
                    "info",
                    BaseType::Nested {
                        package: pkg.to_owned(),
                        kind: InterfaceKind::Msg,
                        name: info.to_owned(),
                    },
                    Collection::Single,
                ),
                field(
                    "request",
                    self.part("Request"),
                    Collection::BoundedSequence(1),
                ),
                field(
                    "response",
                    self.part("Response"),
                    Collection::BoundedSequence(1),
                ),
            ],
            constants: Vec::new(),
        }
    }

    /// The service as one type (`pkg/srv/Name`) for its type description
    /// and hash: `request_message`, `response_message` and
    /// `event_message`, as `rosidl` describes a service.
    pub fn description(&self) -> MsgSpec {
        let field = |name: &str, suffix: &str| Field {
            name: name.to_owned(),
            ty: FieldType {
                base: self.part(suffix),
                collection: Collection::Single,
            },
            default: None,
        };
        MsgSpec {
            package: self.package.clone(),
            kind: self.kind,
            name: self.name.clone(),
            fields: vec![
                field("request_message", "Request"),
                field("response_message", "Response"),
                field("event_message", "Event"),
            ],
            constants: Vec::new(),
        }
    }

    /// A lookup that answers this service's own types (`pkg/srv/Name`,
    /// `_Request`, `_Response`, `_Event`) and asks `lookup` for the rest.
    pub fn lookup<'a>(
        &'a self,
        lookup: impl Fn(&str) -> Option<MsgSpec> + 'a,
    ) -> impl Fn(&str) -> Option<MsgSpec> + 'a {
        move |name| {
            let own = [
                self.description(),
                self.request.clone(),
                self.response.clone(),
                self.event(),
            ];
            own.into_iter()
                .find(|s| s.type_name() == name)
                .or_else(|| lookup(name))
        }
    }
}

/// The identifier every action message carries for its goal.
pub const GOAL_ID_TYPE: &str = "unique_identifier_msgs/msg/UUID";

/// A parsed `.action` file: goal, result and feedback, and what ROS 2
/// derives from them: the `_SendGoal` and `_GetResult` services and the
/// `_FeedbackMessage` (each carrying the goal's id, a
/// [`GOAL_ID_TYPE`]).
///
/// ```
/// use myelin_msgs::idl::parse_action;
///
/// let a = parse_action(
///     "example_interfaces",
///     "Fibonacci",
///     "int32 order\n---\nint32[] sequence\n---\nint32[] sequence\n",
/// )
/// .unwrap();
/// assert_eq!(a.type_name(), "example_interfaces/action/Fibonacci");
/// assert_eq!(a.send_goal().request.type_name(), "example_interfaces/action/Fibonacci_SendGoal_Request");
/// assert_eq!(a.feedback_message().fields[1].name, "feedback");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ActionSpec {
    /// The package (`example_interfaces`).
    pub package: String,
    /// The action's name (`Fibonacci`).
    pub name: String,
    /// `pkg/action/Name_Goal`: the first part.
    pub goal: MsgSpec,
    /// `pkg/action/Name_Result`: the second part.
    pub result: MsgSpec,
    /// `pkg/action/Name_Feedback`: the third part.
    pub feedback: MsgSpec,
}

impl ActionSpec {
    /// `pkg/action/Name`.
    pub fn type_name(&self) -> String {
        format!("{}/action/{}", self.package, self.name)
    }

    fn own(&self, suffix: &str) -> BaseType {
        BaseType::Nested {
            package: self.package.clone(),
            kind: InterfaceKind::Action,
            name: format!("{}_{suffix}", self.name),
        }
    }

    fn message(&self, name: &str, fields: Vec<Field>) -> MsgSpec {
        MsgSpec {
            package: self.package.clone(),
            kind: InterfaceKind::Action,
            name: format!("{}_{name}", self.name),
            fields,
            constants: Vec::new(),
        }
    }

    fn service(&self, name: &str, request: Vec<Field>, response: Vec<Field>) -> SrvSpec {
        let name = format!("{}_{name}", self.name);
        SrvSpec {
            package: self.package.clone(),
            kind: InterfaceKind::Action,
            request: MsgSpec {
                package: self.package.clone(),
                kind: InterfaceKind::Action,
                name: format!("{name}_Request"),
                fields: request,
                constants: Vec::new(),
            },
            response: MsgSpec {
                package: self.package.clone(),
                kind: InterfaceKind::Action,
                name: format!("{name}_Response"),
                fields: response,
                constants: Vec::new(),
            },
            name,
        }
    }

    /// `_SendGoal`: `goal_id` and `goal`, answered by `accepted` and the
    /// server's `stamp`.
    pub fn send_goal(&self) -> SrvSpec {
        self.service(
            "SendGoal",
            vec![goal_id_field(), single("goal", self.own("Goal"))],
            vec![
                single("accepted", BaseType::Primitive(Primitive::Bool)),
                single("stamp", msg_type("builtin_interfaces/msg/Time")),
            ],
        )
    }

    /// `_GetResult`: `goal_id`, answered by the goal's final `status` and
    /// its `result`.
    pub fn get_result(&self) -> SrvSpec {
        self.service(
            "GetResult",
            vec![goal_id_field()],
            vec![
                single("status", BaseType::Primitive(Primitive::Int8)),
                single("result", self.own("Result")),
            ],
        )
    }

    /// `_FeedbackMessage`: `goal_id` and `feedback`, what the feedback
    /// topic carries.
    pub fn feedback_message(&self) -> MsgSpec {
        self.message(
            "FeedbackMessage",
            vec![goal_id_field(), single("feedback", self.own("Feedback"))],
        )
    }

    /// The action as one type (`pkg/action/Name`) for its type
    /// description and hash, as `rosidl` describes an action: `goal`,
    /// `result`, `feedback`, `send_goal_service`, `get_result_service`,
    /// `feedback_message`.
    pub fn description(&self) -> MsgSpec {
        MsgSpec {
            package: self.package.clone(),
            kind: InterfaceKind::Action,
            name: self.name.clone(),
            fields: [
                ("goal", "Goal"),
                ("result", "Result"),
                ("feedback", "Feedback"),
                ("send_goal_service", "SendGoal"),
                ("get_result_service", "GetResult"),
                ("feedback_message", "FeedbackMessage"),
            ]
            .into_iter()
            .map(|(field, part)| single(field, self.own(part)))
            .collect(),
            constants: Vec::new(),
        }
    }

    /// Every type the action defines, itself first: the action, goal,
    /// result, feedback, the two services with their request, response
    /// and event messages, and the feedback message.
    pub fn types(&self) -> Vec<MsgSpec> {
        let mut all = vec![
            self.description(),
            self.goal.clone(),
            self.result.clone(),
            self.feedback.clone(),
        ];
        for srv in [self.send_goal(), self.get_result()] {
            all.push(srv.description());
            all.push(srv.request.clone());
            all.push(srv.response.clone());
            all.push(srv.event());
        }
        all.push(self.feedback_message());
        all
    }

    /// A lookup that answers this action's own types ([`types`](Self::types))
    /// and asks `lookup` for the rest.
    pub fn lookup<'a>(
        &'a self,
        lookup: impl Fn(&str) -> Option<MsgSpec> + 'a,
    ) -> impl Fn(&str) -> Option<MsgSpec> + 'a {
        let own = self.types();
        move |name| {
            own.iter()
                .find(|s| s.type_name() == name)
                .cloned()
                .or_else(|| lookup(name))
        }
    }
}

fn single(name: &str, base: BaseType) -> Field {
    Field {
        name: name.to_owned(),
        ty: FieldType {
            base,
            collection: Collection::Single,
        },
        default: None,
    }
}

/// A nested `.msg` type by its `pkg/msg/Name`.
fn msg_type(type_name: &str) -> BaseType {
    let (package, name) = split_type_name(type_name).expect("a message type name");
    BaseType::Nested {
        package: package.to_owned(),
        kind: InterfaceKind::Msg,
        name: name.to_owned(),
    }
}

fn goal_id_field() -> Field {
    single("goal_id", msg_type(GOAL_ID_TYPE))
}

/// Splits `pkg/msg/Name` into `("pkg", "Name")`.
pub fn split_type_name(type_name: &str) -> Option<(&str, &str)> {
    let (package, rest) = type_name.split_once('/')?;
    let name = rest.strip_prefix("msg/")?;
    (is_valid_package_name(package) && is_valid_message_name(name)).then_some((package, name))
}

/// Why a `.msg` file does not parse. `type_name` is `pkg/msg/Name`, `line`
/// counts from 1.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// A `.srv` file without exactly one `---` line between its request
    /// and its response.
    #[error(
        "{type_name}: a service needs exactly one `---` line between request and response, found {found}"
    )]
    Separator {
        /// The file's type.
        type_name: String,
        /// How many `---` lines it has.
        found: usize,
    },
    /// An `.action` file does not have exactly two `---` lines.
    #[error(
        "{type_name}: an action needs exactly two `---` lines (goal, result, feedback), found {found}"
    )]
    ActionSeparators {
        /// The file's type.
        type_name: String,
        /// How many `---` lines it has.
        found: usize,
    },
    /// The package or message name given to [`parse_msg`] is not valid.
    #[error(
        "{type_name}: invalid message type name (package: lowercase letters, digits and single \
         underscores; message: CamelCase letters and digits)"
    )]
    InvalidTypeName {
        /// The file's type.
        type_name: String,
    },
    /// A line has a type but no name.
    #[error("{type_name}:{line}: expected `TYPE NAME`, `TYPE NAME DEFAULT` or `TYPE NAME=VALUE`")]
    MissingName {
        /// The file's type.
        type_name: String,
        /// The line.
        line: usize,
    },
    /// A field's type is not valid.
    #[error("{type_name}:{line}: invalid type `{ty}`: {reason}")]
    InvalidType {
        /// The file's type.
        type_name: String,
        /// The line.
        line: usize,
        /// The type as written.
        ty: String,
        /// What is wrong.
        reason: &'static str,
    },
    /// A field name is not valid.
    #[error(
        "{type_name}:{line}: invalid field name `{name}` (lowercase letters, digits and single \
         underscores, starting with a letter, not ending with `_`)"
    )]
    InvalidFieldName {
        /// The file's type.
        type_name: String,
        /// The line.
        line: usize,
        /// The name as written.
        name: String,
    },
    /// A constant name is not valid.
    #[error(
        "{type_name}:{line}: invalid constant name `{name}` (uppercase letters, digits and single \
         underscores, starting with a letter, not ending with `_`)"
    )]
    InvalidConstantName {
        /// The file's type.
        type_name: String,
        /// The line.
        line: usize,
        /// The name as written.
        name: String,
    },
    /// A constant's type is not a primitive (arrays, bounded strings and
    /// messages cannot be constants).
    #[error("{type_name}:{line}: constant type `{ty}` is not a primitive type")]
    InvalidConstantType {
        /// The file's type.
        type_name: String,
        /// The line.
        line: usize,
        /// The type as written.
        ty: String,
    },
    /// A default or constant value does not fit its type.
    #[error("{type_name}:{line}: invalid value `{value}` for type `{ty}`: {reason}")]
    InvalidValue {
        /// The file's type.
        type_name: String,
        /// The line.
        line: usize,
        /// The type.
        ty: String,
        /// The value as written.
        value: String,
        /// What is wrong.
        reason: String,
    },
    /// Two fields or two constants have the same name.
    #[error("{type_name}:{line}: duplicate name `{name}`")]
    DuplicateName {
        /// The file's type.
        type_name: String,
        /// The line.
        line: usize,
        /// The name.
        name: String,
    },
}

/// Why a type hash cannot be computed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HashError {
    /// The lookup has no definition for the type being hashed.
    #[error("unknown message type `{name}`")]
    UnknownType {
        /// `pkg/msg/Name`.
        name: String,
    },
    /// The lookup has no definition for a type that a field refers to.
    #[error("unknown message type `{name}` (a field of `{referenced_by}`)")]
    UnknownReference {
        /// `pkg/msg/Name` of the missing type.
        name: String,
        /// `pkg/msg/Name` of the type whose field has it.
        referenced_by: String,
    },
    /// The lookup answered a name with a definition of another type.
    #[error("the definition looked up for `{requested}` is `{found}`")]
    NameMismatch {
        /// The name looked up.
        requested: String,
        /// The type name of the definition returned.
        found: String,
    },
}

/// Parses the `.msg` file `text` of the message `package/Name`.
///
/// Follows `rosidl_adapter`: a `#` starts a comment anywhere on a line
/// (also inside a string value), tabs are spaces, a line with a `=` after
/// its type is a constant. Names are checked against the ROS 2 rules,
/// default and constant values against their types. Never panics.
pub fn parse_msg(package: &str, name: &str, text: &str) -> Result<MsgSpec, ParseError> {
    let type_name = format!("{package}/msg/{name}");
    if !is_valid_package_name(package) || !is_valid_message_name(name) {
        return Err(ParseError::InvalidTypeName { type_name });
    }
    parse_fields(package, InterfaceKind::Msg, name, text, 0)
}

/// Parses the `.srv` file `text` of the service `package/Name`: a request
/// and a response separated by a line `---`, each parsed as
/// [`parse_msg`] parses a `.msg` file (line numbers count in the whole
/// file).
///
/// ```
/// let srv = myelin_msgs::idl::parse_srv(
///     "example_interfaces",
///     "AddTwoInts",
///     "int64 a\nint64 b\n---\nint64 sum\n",
/// )
/// .unwrap();
/// assert_eq!(srv.request.type_name(), "example_interfaces/srv/AddTwoInts_Request");
/// assert_eq!(srv.response.fields[0].name, "sum");
/// ```
pub fn parse_srv(package: &str, name: &str, text: &str) -> Result<SrvSpec, ParseError> {
    let type_name = format!("{package}/srv/{name}");
    if !is_valid_package_name(package) || !is_valid_message_name(name) {
        return Err(ParseError::InvalidTypeName { type_name });
    }
    let lines: Vec<&str> = text.lines().collect();
    let separators: Vec<usize> = lines
        .iter()
        .enumerate()
        .filter(|(_, l)| l.trim() == "---")
        .map(|(i, _)| i)
        .collect();
    let [sep] = separators.as_slice() else {
        return Err(ParseError::Separator {
            type_name,
            found: separators.len(),
        });
    };
    let request = lines[..*sep].join("\n");
    let response = lines[sep + 1..].join("\n");
    Ok(SrvSpec {
        package: package.to_owned(),
        kind: InterfaceKind::Srv,
        name: name.to_owned(),
        request: parse_fields(
            package,
            InterfaceKind::Srv,
            &format!("{name}_Request"),
            &request,
            0,
        )?,
        response: parse_fields(
            package,
            InterfaceKind::Srv,
            &format!("{name}_Response"),
            &response,
            sep + 1,
        )?,
    })
}

/// Parse an `.action` file of `package` (goal, `---`, result, `---`,
/// feedback). See [`ActionSpec`].
pub fn parse_action(package: &str, name: &str, text: &str) -> Result<ActionSpec, ParseError> {
    let type_name = format!("{package}/action/{name}");
    if !is_valid_package_name(package) || !is_valid_message_name(name) {
        return Err(ParseError::InvalidTypeName { type_name });
    }
    let lines: Vec<&str> = text.lines().collect();
    let separators: Vec<usize> = lines
        .iter()
        .enumerate()
        .filter(|(_, l)| l.trim() == "---")
        .map(|(i, _)| i)
        .collect();
    let [first, second] = separators.as_slice() else {
        return Err(ParseError::ActionSeparators {
            type_name,
            found: separators.len(),
        });
    };
    let part = |suffix: &str, from: usize, to: usize| {
        parse_fields(
            package,
            InterfaceKind::Action,
            &format!("{name}_{suffix}"),
            &lines[from..to].join("\n"),
            from,
        )
    };
    Ok(ActionSpec {
        package: package.to_owned(),
        name: name.to_owned(),
        goal: part("Goal", 0, *first)?,
        result: part("Result", first + 1, *second)?,
        feedback: part("Feedback", second + 1, lines.len())?,
    })
}

/// The fields and constants of one message; `first_line` lines come
/// before `text` in its file.
fn parse_fields(
    package: &str,
    kind: InterfaceKind,
    name: &str,
    text: &str,
    first_line: usize,
) -> Result<MsgSpec, ParseError> {
    let type_name = format!("{package}/{}/{name}", kind.as_str());
    let mut spec = MsgSpec {
        package: package.to_owned(),
        kind,
        name: name.to_owned(),
        fields: Vec::new(),
        constants: Vec::new(),
    };
    let mut field_names = HashSet::new();
    let mut constant_names = HashSet::new();
    for (index, raw) in text.lines().enumerate() {
        let cx = Cx {
            type_name: &type_name,
            line: first_line + index + 1,
        };
        let without_comment = raw.split_once('#').map_or(raw, |(code, _)| code);
        let line = without_comment.replace('\t', " ");
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let Some((ty, rest)) = line.split_once(' ') else {
            return Err(cx.missing_name());
        };
        let rest = rest.trim_start();
        if let Some((constant_name, value)) = rest.split_once('=') {
            let constant_name = constant_name.trim_end();
            let value = value.trim_start();
            let Some(prim) = Primitive::from_msg_name(ty) else {
                return Err(ParseError::InvalidConstantType {
                    type_name: type_name.clone(),
                    line: cx.line,
                    ty: ty.to_owned(),
                });
            };
            if !is_valid_constant_name(constant_name) {
                return Err(ParseError::InvalidConstantName {
                    type_name: type_name.clone(),
                    line: cx.line,
                    name: constant_name.to_owned(),
                });
            }
            check_scalar(prim, None, value)
                .map_err(|reason| cx.invalid_value(ty, value, reason))?;
            if !constant_names.insert(constant_name.to_owned()) {
                return Err(cx.duplicate(constant_name));
            }
            spec.constants.push(Constant {
                ty: prim,
                name: constant_name.to_owned(),
                value: value.to_owned(),
            });
        } else {
            let (field_name, default) = match rest.split_once(' ') {
                Some((n, d)) => (n, Some(d.trim_start())),
                None => (rest, None),
            };
            let field_ty = parse_type(ty, package).map_err(|reason| ParseError::InvalidType {
                type_name: type_name.clone(),
                line: cx.line,
                ty: ty.to_owned(),
                reason,
            })?;
            if !is_valid_field_name(field_name) {
                return Err(ParseError::InvalidFieldName {
                    type_name: type_name.clone(),
                    line: cx.line,
                    name: field_name.to_owned(),
                });
            }
            if let Some(d) = default {
                check_default(&field_ty, d).map_err(|reason| cx.invalid_value(ty, d, reason))?;
            }
            if !field_names.insert(field_name.to_owned()) {
                return Err(cx.duplicate(field_name));
            }
            spec.fields.push(Field {
                name: field_name.to_owned(),
                ty: field_ty,
                default: default.map(str::to_owned),
            });
        }
    }
    Ok(spec)
}

/// Where a parse error is.
struct Cx<'a> {
    type_name: &'a str,
    line: usize,
}

impl Cx<'_> {
    fn missing_name(&self) -> ParseError {
        ParseError::MissingName {
            type_name: self.type_name.to_owned(),
            line: self.line,
        }
    }

    fn duplicate(&self, name: &str) -> ParseError {
        ParseError::DuplicateName {
            type_name: self.type_name.to_owned(),
            line: self.line,
            name: name.to_owned(),
        }
    }

    fn invalid_value(&self, ty: &str, value: &str, reason: String) -> ParseError {
        ParseError::InvalidValue {
            type_name: self.type_name.to_owned(),
            line: self.line,
            ty: ty.to_owned(),
            value: value.to_owned(),
            reason,
        }
    }
}

/// A positive decimal size or bound (`rosidl_adapter` takes Python ints > 0).
fn parse_size(s: &str) -> Result<u64, &'static str> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err("sizes and bounds are decimal integers");
    }
    match s.parse::<u64>() {
        Ok(0) => Err("sizes and bounds must be greater than 0"),
        Ok(n) => Ok(n),
        Err(_) => Err("size or bound too large"),
    }
}

fn parse_type(ty: &str, package: &str) -> Result<FieldType, &'static str> {
    let (base, collection) = match ty.strip_suffix(']') {
        None => (ty, Collection::Single),
        Some(head) => {
            let (base, size) = head.rsplit_once('[').ok_or("`]` without `[`")?;
            let collection = if size.is_empty() {
                Collection::UnboundedSequence
            } else if let Some(bound) = size.strip_prefix("<=") {
                Collection::BoundedSequence(parse_size(bound)?)
            } else {
                Collection::Array(parse_size(size)?)
            };
            (base, collection)
        }
    };
    let base = if let Some(p) = Primitive::from_msg_name(base) {
        BaseType::Primitive(p)
    } else if let Some(bound) = base.strip_prefix("string<=") {
        BaseType::BoundedString(parse_size(bound)?)
    } else if let Some(bound) = base.strip_prefix("wstring<=") {
        BaseType::BoundedWString(parse_size(bound)?)
    } else {
        let (pkg, name) = match base.split_once('/') {
            Some((pkg, name)) => (pkg, name),
            // ROS convention: a bare `Header` is the standard header.
            None if base == "Header" => ("std_msgs", base),
            None => (package, base),
        };
        if !is_valid_package_name(pkg) || !is_valid_message_name(name) {
            return Err(
                "not a primitive type nor a message type (`Name` or `pkg/Name`, pkg in \
                 lowercase, Name in CamelCase)",
            );
        }
        BaseType::Nested {
            package: pkg.to_owned(),
            kind: InterfaceKind::Msg,
            name: name.to_owned(),
        }
    };
    Ok(FieldType { base, collection })
}

fn check_default(ty: &FieldType, value: &str) -> Result<(), String> {
    let (prim, bound) = match &ty.base {
        BaseType::Primitive(p) => (*p, None),
        BaseType::BoundedString(n) => (Primitive::String, Some(*n)),
        BaseType::BoundedWString(n) => (Primitive::WString, Some(*n)),
        BaseType::Nested { .. } => {
            return Err("fields of message types take no default value".into());
        }
    };
    if ty.collection == Collection::Single {
        return check_scalar(prim, bound, value);
    }
    let inner = value
        .strip_prefix('[')
        .and_then(|v| v.strip_suffix(']'))
        .ok_or("an array value is `[A, B, ...]`")?;
    let elements = split_elements(
        inner,
        matches!(prim, Primitive::String | Primitive::WString),
    )?;
    let count = elements.len() as u64;
    match ty.collection {
        Collection::Array(n) if count != n => {
            return Err(format!("the array needs exactly {n} elements, not {count}"));
        }
        Collection::BoundedSequence(n) if count > n => {
            return Err(format!(
                "the sequence takes at most {n} elements, not {count}"
            ));
        }
        _ => {}
    }
    for (i, e) in elements.iter().enumerate() {
        check_scalar(prim, bound, e.trim()).map_err(|r| format!("element {i}: {r}"))?;
    }
    Ok(())
}

/// Splits the inside of `[...]` at its commas (outside quotes for
/// strings).
fn split_elements(inner: &str, strings: bool) -> Result<Vec<&str>, String> {
    if inner.trim().is_empty() {
        return Ok(Vec::new());
    }
    if !strings {
        return Ok(inner.split(',').collect());
    }
    let mut out = Vec::new();
    let mut start = 0;
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for (i, c) in inner.char_indices() {
        match quote {
            Some(_) if escaped => escaped = false,
            Some(_) if c == '\\' => escaped = true,
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if c == '"' || c == '\'' => quote = Some(c),
            None if c == ',' => {
                out.push(&inner[start..i]);
                start = i + 1;
            }
            None => {}
        }
    }
    if quote.is_some() {
        return Err("unterminated string quote".into());
    }
    out.push(&inner[start..]);
    Ok(out)
}

/// Checks one primitive value as `rosidl_adapter` parses it.
fn check_scalar(prim: Primitive, bound: Option<u64>, value: &str) -> Result<(), String> {
    match prim {
        Primitive::Bool => match value.to_ascii_lowercase().as_str() {
            "true" | "false" | "1" | "0" => Ok(()),
            _ => Err("a bool is `true`, `false`, `1` or `0`".into()),
        },
        Primitive::Float32 | Primitive::Float64 => value
            .trim()
            .parse::<f64>()
            .map(drop)
            .map_err(|_| "not a floating point number (`.` as the separator)".into()),
        Primitive::String | Primitive::WString => {
            let text = unquote(value)?;
            match bound {
                Some(n) if text.chars().count() as u64 > n => {
                    Err(format!("longer than the bound of {n} characters"))
                }
                _ => Ok(()),
            }
        }
        int => {
            let (lo, hi) = int.int_range().unwrap_or((0, 0));
            match parse_int(value) {
                Some(v) if (lo..=hi).contains(&v) => Ok(()),
                _ => Err(format!("not an integer in {lo}..={hi}")),
            }
        }
    }
}

/// An integer as Python's `int(s)` or `int(s, 0)` reads it (no `_`).
fn parse_int(s: &str) -> Option<i128> {
    let s = s.trim();
    let (negative, digits) = match s.as_bytes().first()? {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    let lower = digits.to_ascii_lowercase();
    let (radix, digits) = if let Some(d) = lower.strip_prefix("0x") {
        (16, d)
    } else if let Some(d) = lower.strip_prefix("0o") {
        (8, d)
    } else if let Some(d) = lower.strip_prefix("0b") {
        (2, d)
    } else {
        (10, lower.as_str())
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_alphanumeric()) {
        return None;
    }
    let magnitude = i128::from_str_radix(digits, radix).ok()?;
    Some(if negative { -magnitude } else { magnitude })
}

/// The text of a string value: outer quotes removed, escaped quotes
/// unescaped; an unescaped inner quote is an error.
fn unquote(value: &str) -> Result<String, String> {
    for q in ['"', '\''] {
        if value.len() >= 2 && value.starts_with(q) && value.ends_with(q) {
            let inner = &value[1..value.len() - 1];
            let mut out = String::new();
            let mut prev_backslash = false;
            for c in inner.chars() {
                if c == q && !prev_backslash {
                    return Err("an inner quote is not escaped".into());
                }
                if c == q {
                    out.pop();
                }
                out.push(c);
                prev_backslash = c == '\\';
            }
            return Ok(out);
        }
    }
    Ok(value.to_owned())
}

/// `[a-z][a-z0-9_]*`, no `__`, not ending in `_`.
fn is_valid_package_name(s: &str) -> bool {
    let b = s.as_bytes();
    matches!(b.first(), Some(c) if c.is_ascii_lowercase())
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'_')
        && !s.contains("__")
        && !s.ends_with('_')
}

fn is_valid_field_name(s: &str) -> bool {
    is_valid_package_name(s)
}

/// `[A-Z][A-Za-z0-9]*`.
fn is_valid_message_name(s: &str) -> bool {
    let b = s.as_bytes();
    matches!(b.first(), Some(c) if c.is_ascii_uppercase())
        && b.iter().all(|c| c.is_ascii_alphanumeric())
}

/// `[A-Z]([A-Z0-9_]?[A-Z0-9]+)*`: uppercase, digits and single
/// underscores, not ending in `_`.
fn is_valid_constant_name(s: &str) -> bool {
    let b = s.as_bytes();
    matches!(b.first(), Some(c) if c.is_ascii_uppercase())
        && b.iter()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == b'_')
        && !s.contains("__")
        && !s.ends_with('_')
}

/// The REP 2011 type hash, `RIHS01_` and 64 lowercase hex digits, of the
/// message `root` (`pkg/msg/Name`). `lookup` gives the definition of a
/// type by its `pkg/msg/Name`: `root` and every type it refers to,
/// transitively.
pub fn type_hash(
    root: &str,
    lookup: impl Fn(&str) -> Option<MsgSpec>,
) -> Result<String, HashError> {
    let json = type_description_json(root, lookup)?;
    let digest = Sha256::digest(json.as_bytes());
    let mut out = String::with_capacity(7 + 64);
    out.push_str("RIHS01_");
    for b in digest {
        let _ = write!(out, "{b:02x}");
    }
    Ok(out)
}

/// The REP 2011 type hash of the service `srv` (`pkg/srv/Name`): the hash
/// of its description (request, response and event messages); `lookup`
/// gives every message type its parts refer to, including
/// [`SERVICE_EVENT_INFO`] and `builtin_interfaces/msg/Time`.
pub fn srv_type_hash(
    srv: &SrvSpec,
    lookup: impl Fn(&str) -> Option<MsgSpec>,
) -> Result<String, HashError> {
    type_hash(&srv.type_name(), srv.lookup(lookup))
}

/// The REP 2011 type hash of the action `action` (`pkg/action/Name`):
/// the hash of its description (goal, result, feedback, the two services
/// and the feedback message); `lookup` gives every message type its parts
/// refer to, including [`GOAL_ID_TYPE`], [`SERVICE_EVENT_INFO`] and
/// `builtin_interfaces/msg/Time`. Each derived type's own hash is
/// [`type_hash`] of its name with `action.lookup(..)`.
pub fn action_type_hash(
    action: &ActionSpec,
    lookup: impl Fn(&str) -> Option<MsgSpec>,
) -> Result<String, HashError> {
    type_hash(&action.type_name(), action.lookup(lookup))
}

/// One type of a type description (REP 2016's
/// `IndividualTypeDescription`): its name and its fields with their
/// `type_description_interfaces` type numbers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DescribedType {
    /// `pkg/msg/Type`.
    pub type_name: String,
    /// The fields in order (an empty message has
    /// [`EMPTY_STRUCT_MEMBER`]).
    pub fields: Vec<DescribedField>,
}

/// One field of a [`DescribedType`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DescribedField {
    /// The name.
    pub name: String,
    /// The `FIELD_TYPE_*` number (base type, plus 48 for an array, 96 for
    /// a bounded sequence, 144 for an unbounded one).
    pub type_id: u64,
    /// The array size or sequence bound.
    pub capacity: u64,
    /// The bound of a bounded string.
    pub string_capacity: u64,
    /// `pkg/msg/Type` of a nested type, else empty.
    pub nested_type_name: String,
    /// The default value as the file writes it, else empty (not part of
    /// the hash).
    pub default_value: String,
}

/// The description of `root` (REP 2016): the type and every type it
/// refers to, directly or not, sorted by name; what [`type_hash`] hashes.
pub fn type_description(
    root: &str,
    lookup: impl Fn(&str) -> Option<MsgSpec>,
) -> Result<(DescribedType, Vec<DescribedType>), HashError> {
    let find = |name: &str| -> Option<Result<MsgSpec, HashError>> {
        let spec = lookup(name)?;
        let found = spec.type_name();
        Some(if found == name {
            Ok(spec)
        } else {
            Err(HashError::NameMismatch {
                requested: name.to_owned(),
                found,
            })
        })
    };
    let root_spec = find(root).ok_or_else(|| HashError::UnknownType {
        name: root.to_owned(),
    })??;
    let mut referenced: BTreeMap<String, MsgSpec> = BTreeMap::new();
    let mut pending: Vec<(String, String)> = nested_names(&root_spec)
        .map(|n| (n, root.to_owned()))
        .collect();
    while let Some((name, referenced_by)) = pending.pop() {
        if name == root || referenced.contains_key(&name) {
            continue;
        }
        let spec = find(&name).ok_or_else(|| HashError::UnknownReference {
            name: name.clone(),
            referenced_by,
        })??;
        pending.extend(nested_names(&spec).map(|n| (n, name.clone())));
        referenced.insert(name, spec);
    }
    Ok((
        describe(&root_spec),
        referenced.values().map(describe).collect(),
    ))
}

/// The JSON that [`type_hash`] hashes: `{"type_description": ...,
/// "referenced_type_descriptions": [...]}` as Python's
/// `json.dumps(separators=(", ", ": "), ensure_ascii=True)` writes it in
/// `rosidl_generator_type_description`, the referenced types sorted by
/// name.
pub fn type_description_json(
    root: &str,
    lookup: impl Fn(&str) -> Option<MsgSpec>,
) -> Result<String, HashError> {
    let (root, referenced) = type_description(root, lookup)?;
    let mut out = String::from("{\"type_description\": ");
    write_description(&mut out, &root);
    out.push_str(", \"referenced_type_descriptions\": [");
    for (i, d) in referenced.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        write_description(&mut out, d);
    }
    out.push_str("]}");
    Ok(out)
}

fn nested_names(spec: &MsgSpec) -> impl Iterator<Item = String> + '_ {
    spec.fields
        .iter()
        .filter_map(|f| f.ty.base.nested_type_name())
}

fn describe(spec: &MsgSpec) -> DescribedType {
    let mut fields: Vec<DescribedField> = spec
        .fields
        .iter()
        .map(|f| {
            let (base_id, string_capacity) = match &f.ty.base {
                BaseType::Primitive(p) => (p.type_id(), 0),
                BaseType::BoundedString(n) => (21, *n),
                BaseType::BoundedWString(n) => (22, *n),
                BaseType::Nested { .. } => (1, 0),
            };
            let (offset, capacity) = match f.ty.collection {
                Collection::Single => (0, 0),
                Collection::Array(n) => (48, n),
                Collection::BoundedSequence(n) => (96, n),
                Collection::UnboundedSequence => (144, 0),
            };
            DescribedField {
                name: f.name.clone(),
                type_id: base_id + offset,
                capacity,
                string_capacity,
                nested_type_name: f.ty.base.nested_type_name().unwrap_or_default(),
                default_value: f.default.clone().unwrap_or_default(),
            }
        })
        .collect();
    if fields.is_empty() {
        fields.push(DescribedField {
            name: EMPTY_STRUCT_MEMBER.to_owned(),
            type_id: Primitive::UInt8.type_id(),
            capacity: 0,
            string_capacity: 0,
            nested_type_name: String::new(),
            default_value: String::new(),
        });
    }
    DescribedType {
        type_name: spec.type_name(),
        fields,
    }
}

fn write_description(out: &mut String, d: &DescribedType) {
    out.push_str("{\"type_name\": ");
    write_json_string(out, &d.type_name);
    out.push_str(", \"fields\": [");
    for (i, f) in d.fields.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        out.push_str("{\"name\": ");
        write_json_string(out, &f.name);
        let _ = write!(
            out,
            ", \"type\": {{\"type_id\": {}, \"capacity\": {}, \
             \"string_capacity\": {}, \"nested_type_name\": ",
            f.type_id, f.capacity, f.string_capacity
        );
        write_json_string(out, &f.nested_type_name);
        out.push_str("}}");
    }
    out.push_str("]}");
}

/// A JSON string as Python's `json.dumps(..., ensure_ascii=True)` writes
/// it: printable ASCII as is, the rest `\uXXXX` (UTF-16, lowercase hex).
fn write_json_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            ' '..='~' => out.push(c),
            _ => {
                let mut units = [0u16; 2];
                for u in c.encode_utf16(&mut units) {
                    let _ = write!(out, "\\u{u:04x}");
                }
            }
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn registry(defs: &[(&str, &str)]) -> impl Fn(&str) -> Option<MsgSpec> {
        let specs: Vec<MsgSpec> = defs
            .iter()
            .map(|(name, text)| {
                let (pkg, n) = split_type_name(name).unwrap();
                parse_msg(pkg, n, text).unwrap()
            })
            .collect();
        move |name| specs.iter().find(|s| s.type_name() == name).cloned()
    }

    const TIME: (&str, &str) = ("builtin_interfaces/msg/Time", "int32 sec\nuint32 nanosec\n");
    const EVENT_INFO: (&str, &str) = (
        SERVICE_EVENT_INFO,
        include_str!("../msg/service_msgs/ServiceEventInfo.msg"),
    );

    /// Service hashes as ROS 2 Jazzy publishes them in rmw_zenoh key
    /// expressions (rmw_zenoh's design document for AddTwoInts; two
    /// independent rmw_zenoh peers for the others).
    #[test]
    fn service_hashes_match_ros_2() {
        let lookup = registry(&[TIME, EVENT_INFO]);
        for (pkg, name, text, want) in [
            (
                "example_interfaces",
                "AddTwoInts",
                "int64 a\nint64 b\n---\nint64 sum\n",
                "RIHS01_e118de6bf5eeb66a2491b5bda11202e7b68f198d6f67922cf30364858239c81a",
            ),
            (
                "std_srvs",
                "Trigger",
                "---\nbool success # done?\nstring message\n",
                "RIHS01_eeff2cd6fa5ad9d27cdf4dec64818317839b62f212a91e6b5304b634b2062c5f",
            ),
            (
                "example_interfaces",
                "SetBool",
                "bool data\n---\nbool success\nstring message\n",
                "RIHS01_a69782e5631b12e15c8e218410de1685bbf13e382718295adad14037a24afbe8",
            ),
        ] {
            let srv = parse_srv(pkg, name, text).unwrap();
            assert_eq!(
                srv_type_hash(&srv, &lookup).unwrap(),
                want,
                "{pkg}/srv/{name}"
            );
        }
    }

    /// An action's hashes as ROS 2 generates them: `example_interfaces/
    /// action/Fibonacci`, each of its 13 types, as rosidl's Jazzy/Kilted
    /// generator writes them (generated `fibonacci__description.c` of a
    /// micro-ROS Kilted build, and rosidl's own Python run on the Jazzy
    /// sources); `action_msgs`' types as `ros2 action info -v` prints them
    /// in the ROS 2 documentation.
    #[test]
    fn action_hashes_match_ros_2() {
        let lookup = registry(&[
            TIME,
            EVENT_INFO,
            (
                GOAL_ID_TYPE,
                include_str!("../msg/unique_identifier_msgs/UUID.msg"),
            ),
        ]);
        let action = parse_action(
            "example_interfaces",
            "Fibonacci",
            include_str!("../action/example_interfaces/Fibonacci.action"),
        )
        .unwrap();
        let own = action.lookup(&lookup);
        for (name, want) in [
            (
                "Fibonacci",
                "9508051da1ea4658de144b09bd0690ff3de52104683d847aed764d2915906f51",
            ),
            (
                "Fibonacci_Goal",
                "226cb437e4355dcd3e914f930382a3b0cc1da81545bd319ed554e95a03255f51",
            ),
            (
                "Fibonacci_Result",
                "fea81394f25aa4502217953f1a021fb750e79c10bbd43f13dd94632da6569649",
            ),
            (
                "Fibonacci_Feedback",
                "2b12e37361da6f408d4c85bc24a18de64333f29082f2ca34b5ee33dc4c8b42a9",
            ),
            (
                "Fibonacci_SendGoal",
                "d1a57fb2a4afe8c21e34fb10db206f16ce6729b28531141472df92277c55b557",
            ),
            (
                "Fibonacci_SendGoal_Request",
                "3d088942b413247db536576f0286768c6be8fcd5d0c9a5d544f359fba090a238",
            ),
            (
                "Fibonacci_SendGoal_Response",
                "d8c07bb3d5b766fe4b43159c9a5222af5214e2fcc29229b991d826166c512be1",
            ),
            (
                "Fibonacci_SendGoal_Event",
                "d5e5b312dbf847307b0e876c2ecc9d80258e95b0d17f8f7bfc581c4a29c83484",
            ),
            (
                "Fibonacci_GetResult",
                "1b0de0d5d29dc955d92f546706568428632771db13ec84c15ec1c1a59f424a57",
            ),
            (
                "Fibonacci_GetResult_Request",
                "c8a4f5e7d13b81286ee1043e2ecd084281cecf1ff06aaa799464f5f15479f003",
            ),
            (
                "Fibonacci_GetResult_Response",
                "6021dc98ab9b4bbe395e48aa4de81ee5f68eb570f88358affcc648146668b24f",
            ),
            (
                "Fibonacci_GetResult_Event",
                "ac4e9cdb954c2e192c9f0753d46f59ab6f0101d5fb5b9542fd8ab2906e40c4d9",
            ),
            (
                "Fibonacci_FeedbackMessage",
                "c1de71afd52e49a89c53d8262366884185bc0a02f78ce051c4e46b0a7fe59bb2",
            ),
        ] {
            let type_name = format!("example_interfaces/action/{name}");
            assert_eq!(
                type_hash(&type_name, &own).unwrap(),
                format!("RIHS01_{want}"),
                "{type_name}"
            );
        }
        assert_eq!(
            action_type_hash(&action, &lookup).unwrap(),
            "RIHS01_9508051da1ea4658de144b09bd0690ff3de52104683d847aed764d2915906f51"
        );
        assert_eq!(action.types().len(), 13);
        assert!(matches!(
            parse_action("p", "A", "int32 a\n---\n"),
            Err(ParseError::ActionSeparators { found: 1, .. })
        ));
    }

    #[test]
    fn a_service_needs_one_separator() {
        for (text, found) in [("int64 a\n", 0), ("---\n---\n", 2)] {
            assert_eq!(
                parse_srv("p", "S", text),
                Err(ParseError::Separator {
                    type_name: "p/srv/S".into(),
                    found
                })
            );
        }
        // Errors in the response count lines in the whole file.
        match parse_srv("p", "S", "int64 a\n---\nint64 a b c\nfoo@ x\n") {
            Err(ParseError::InvalidValue { line, .. } | ParseError::InvalidType { line, .. }) => {
                assert!(line >= 3, "line {line}")
            }
            other => panic!("{other:?}"),
        }
    }
    const HEADER: (&str, &str) = (
        "std_msgs/msg/Header",
        "builtin_interfaces/Time stamp\nstring frame_id\n",
    );

    #[test]
    fn string_json_matches_rosidl() {
        let lookup = registry(&[("std_msgs/msg/String", "string data")]);
        assert_eq!(
            type_description_json("std_msgs/msg/String", &lookup).unwrap(),
            r#"{"type_description": {"type_name": "std_msgs/msg/String", "fields": [{"name": "data", "type": {"type_id": 17, "capacity": 0, "string_capacity": 0, "nested_type_name": ""}}]}, "referenced_type_descriptions": []}"#
        );
    }

    #[test]
    /// Published values (rosidl's output), for inline definitions and for
    /// the `.msg` files this crate ships.
    fn known_hashes() {
        let lookup = registry(&[
            ("std_msgs/msg/String", "string data"),
            ("std_msgs/msg/Int32", "int32 data"),
            ("std_msgs/msg/Empty", "# nothing\n"),
            ("std_msgs/msg/Char", "char data"),
            ("std_msgs/msg/Byte", "byte data"),
            (
                "geometry_msgs/msg/Vector3",
                "float64 x\nfloat64 y\nfloat64 z",
            ),
            TIME,
            HEADER,
        ]);
        for (name, hash) in [
            (
                "std_msgs/msg/String",
                "RIHS01_df668c740482bbd48fb39d76a70dfd4bd59db1288021743503259e948f6b1a18",
            ),
            (
                "builtin_interfaces/msg/Time",
                "RIHS01_b106235e25a4c5ed35098aa0a61a3ee9c9b18d197f398b0e4206cea9acf9c197",
            ),
            (
                "std_msgs/msg/Header",
                "RIHS01_f49fb3ae2cf070f793645ff749683ac6b06203e41c891e17701b1cb597ce6a01",
            ),
            (
                "std_msgs/msg/Int32",
                "RIHS01_b6578ded3c58c626cfe8d1a6fb6e04f706f97e9f03d2727c9ff4e74b1cef0deb",
            ),
            (
                "geometry_msgs/msg/Vector3",
                "RIHS01_cc12fe83e4c02719f1ce8070bfd14aecd40f75a96696a67a2a1f37f7dbb0765d",
            ),
            (
                "std_msgs/msg/Empty",
                "RIHS01_20b625256f32d5dbc0d04fee44f43c41e51c70d3502f84b4a08e7a9c26a96312",
            ),
            // The published hashes: `char` is hashed as uint8, `byte` as octet.
            (
                "std_msgs/msg/Char",
                "RIHS01_3ad2d04dd29ba19d04b16659afa3ccaedd691914b02a64e82e252f2fa6a586a9",
            ),
            (
                "std_msgs/msg/Byte",
                "RIHS01_41e1a3345f73fe93ede006da826a6ee274af23dd4653976ff249b0f44e3e798f",
            ),
        ] {
            assert_eq!(type_hash(name, &lookup).unwrap(), hash, "{name}");
            // The crate's shipped `.msg` files give the same published hash.
            if crate::definition(name).is_some() {
                assert_eq!(crate::ros_hash_of(name).as_deref(), Some(hash), "{name}");
            }
        }
        assert_eq!(crate::ros_hash_of("std_msgs/msg/Nope"), None);
    }

    #[test]
    fn type_ids_capacities_and_references() {
        let lookup = registry(&[
            (
                "my_pkg/msg/All",
                "char c\nbyte b\nbool f\nfloat32[] v\nstring<=5[<=3] s\nwstring<=7 w\n\
                 int16[4] a\nOther[<=2] o\nHeader h\nmy_pkg/Other one\n",
            ),
            ("my_pkg/msg/Other", "Header header\n"),
            TIME,
            HEADER,
        ]);
        let json = type_description_json("my_pkg/msg/All", &lookup).unwrap();
        for part in [
            r#"{"name": "c", "type": {"type_id": 3, "capacity": 0, "string_capacity": 0, "nested_type_name": ""}}"#,
            r#"{"name": "b", "type": {"type_id": 16, "capacity": 0,"#,
            r#"{"name": "f", "type": {"type_id": 15, "capacity": 0,"#,
            r#"{"name": "v", "type": {"type_id": 154, "capacity": 0,"#,
            r#"{"name": "s", "type": {"type_id": 117, "capacity": 3, "string_capacity": 5,"#,
            r#"{"name": "w", "type": {"type_id": 22, "capacity": 0, "string_capacity": 7,"#,
            r#"{"name": "a", "type": {"type_id": 52, "capacity": 4,"#,
            r#"{"name": "o", "type": {"type_id": 97, "capacity": 2, "string_capacity": 0, "nested_type_name": "my_pkg/msg/Other"}}"#,
            r#"{"name": "h", "type": {"type_id": 1, "capacity": 0, "string_capacity": 0, "nested_type_name": "std_msgs/msg/Header"}}"#,
        ] {
            assert!(json.contains(part), "{part} not in {json}");
        }
        // Referenced: transitive, sorted by name, each once.
        let refs = json
            .split("\"referenced_type_descriptions\": ")
            .nth(1)
            .unwrap();
        let names: Vec<&str> = refs
            .match_indices("\"type_name\": \"")
            .map(|(i, m)| {
                let rest = &refs[i + m.len()..];
                &rest[..rest.find('"').unwrap()]
            })
            .collect();
        assert_eq!(
            names,
            [
                "builtin_interfaces/msg/Time",
                "my_pkg/msg/Other",
                "std_msgs/msg/Header"
            ]
        );
    }

    #[test]
    fn hash_errors() {
        let lookup = registry(&[("a/msg/A", "B b"), ("a/msg/C", "int8 x")]);
        assert_eq!(
            type_hash("a/msg/A", &lookup),
            Err(HashError::UnknownReference {
                name: "a/msg/B".into(),
                referenced_by: "a/msg/A".into()
            })
        );
        assert_eq!(
            type_hash("a/msg/X", &lookup),
            Err(HashError::UnknownType {
                name: "a/msg/X".into()
            })
        );
        let wrong = |_: &str| lookup("a/msg/C");
        assert!(matches!(
            type_hash("a/msg/D", wrong),
            Err(HashError::NameMismatch { .. })
        ));
    }

    #[test]
    fn parses_fields_constants_defaults_and_comments() {
        let text = "# A file comment\n\
                    \n\
                    uint8 RED=1   # red\n\
                    string GREETING = 'hi there'\n\
                    int32  x  -3  # trailing comment\n\
                    \tfloat64 y 1e-3\n\
                    string<=4 name \"abcd\"\n\
                    bool[2] flags [true, 0]\n\
                    string[<=2] tags [\"a,b\", 'c']\n\
                    uint8[] data []\n\
                    Header header\n\
                    geometry_msgs/Point p\n\
                    Local l\n\
                    uint64 big 0xffffffffffffffff\n";
        let spec = parse_msg("my_pkg", "Thing", text).unwrap();
        assert_eq!(spec.type_name(), "my_pkg/msg/Thing");
        assert_eq!(
            spec.constants,
            [
                Constant {
                    ty: Primitive::UInt8,
                    name: "RED".into(),
                    value: "1".into()
                },
                Constant {
                    ty: Primitive::String,
                    name: "GREETING".into(),
                    value: "'hi there'".into()
                },
            ]
        );
        let fields: Vec<(String, String, Option<String>)> = spec
            .fields
            .iter()
            .map(|f| (f.name.clone(), f.ty.to_string(), f.default.clone()))
            .collect();
        let expect = [
            ("x", "int32", Some("-3")),
            ("y", "float64", Some("1e-3")),
            ("name", "string<=4", Some("\"abcd\"")),
            ("flags", "bool[2]", Some("[true, 0]")),
            ("tags", "string[<=2]", Some("[\"a,b\", 'c']")),
            ("data", "uint8[]", Some("[]")),
            ("header", "std_msgs/Header", None),
            ("p", "geometry_msgs/Point", None),
            ("l", "my_pkg/Local", None),
            ("big", "uint64", Some("0xffffffffffffffff")),
        ];
        let expect: Vec<(String, String, Option<String>)> = expect
            .iter()
            .map(|(n, t, d)| (n.to_string(), t.to_string(), d.map(str::to_owned)))
            .collect();
        assert_eq!(fields, expect);
    }

    #[test]
    fn errors_name_the_type_and_line() {
        let err = |text: &str| parse_msg("p", "M", text).unwrap_err();
        let line = |e: &ParseError| match e {
            ParseError::InvalidTypeName { .. }
            | ParseError::Separator { .. }
            | ParseError::ActionSeparators { .. } => 0,
            ParseError::MissingName { line, .. }
            | ParseError::InvalidType { line, .. }
            | ParseError::InvalidFieldName { line, .. }
            | ParseError::InvalidConstantName { line, .. }
            | ParseError::InvalidConstantType { line, .. }
            | ParseError::InvalidValue { line, .. }
            | ParseError::DuplicateName { line, .. } => *line,
        };
        let cases: &[(&str, usize, &str)] = &[
            ("int32", 1, "expected `TYPE NAME`"),
            ("# c\nint33 x", 2, "invalid type `int33`"),
            ("int32[0] x", 1, "greater than 0"),
            ("int32[<=x] x", 1, "decimal"),
            ("string<=0 s", 1, "greater than 0"),
            ("int32] x", 1, "without `[`"),
            ("a/b/C x", 1, "invalid type"),
            ("int32 X", 1, "invalid field name `X`"),
            ("int32 a__b", 1, "invalid field name"),
            ("int32 a_", 1, "invalid field name"),
            ("int32 bad_=1", 1, "invalid constant name `bad_`"),
            ("int32[2] A=1", 1, "constant type `int32[2]`"),
            ("Foo A=1", 1, "constant type"),
            ("uint8 A=256", 1, "invalid value `256`"),
            ("int8 x -129", 1, "invalid value"),
            ("bool b yes", 1, "invalid value"),
            ("float32 f 1,5", 1, "invalid value"),
            ("string<=2 s 'abc'", 1, "bound"),
            ("string s 'a'b'", 1, "not escaped"),
            ("int32[2] a [1]", 1, "exactly 2"),
            ("int32[<=1] a [1, 2]", 1, "at most 1"),
            ("int32[] a 1", 1, "[A, B, ...]"),
            ("string[] a ['x]", 1, "unterminated"),
            ("Foo f 1", 1, "no default"),
            ("int32 x\n\nint64 x", 3, "duplicate name `x`"),
            ("int32 A=1\nint32 A=2", 2, "duplicate name `A`"),
        ];
        for (text, at, what) in cases {
            let e = err(text);
            let msg = e.to_string();
            assert_eq!(line(&e), *at, "{text:?}: {msg}");
            assert!(msg.starts_with(&format!("p/msg/M:{at}: ")), "{msg}");
            assert!(msg.contains(what), "{text:?}: {msg}");
        }
        assert!(matches!(
            parse_msg("P", "M", ""),
            Err(ParseError::InvalidTypeName { .. })
        ));
        assert!(matches!(
            parse_msg("p", "m", ""),
            Err(ParseError::InvalidTypeName { .. })
        ));
    }

    #[test]
    fn json_strings_escape_as_python() {
        let mut out = String::new();
        write_json_string(&mut out, "a\"\\\n\u{1}\u{7f}é😀");
        assert_eq!(out, r#""a\"\\\n\u0001\u007f\u00e9\ud83d\ude00""#);
    }

    proptest! {
        #[test]
        fn parse_never_panics(text in any::<String>()) {
            let _ = parse_msg("pkg", "Msg", &text);
        }

        #[test]
        fn parse_never_panics_on_msg_like_text(
            lines in proptest::collection::vec(
                "[ \t#]{0,2}(u?int(8|16|32|64)|string|bool|char|byte|float(32|64)|Header|[a-z/]{0,4}[A-Z]?[a-z]{0,3})\
                 (<=[0-9]{0,3})?(\\[(<=)?[0-9]{0,3}\\]?)?[ \t]{0,2}[a-zA-Z_]{0,5}[ =]{0,2}\
                 [-+0-9xX.'\"\\[\\],a-z ]{0,8}",
                0..6,
            )
        ) {
            let text = lines.join("\n");
            if let Ok(spec) = parse_msg("pkg", "Msg", &text) {
                let lookup = |name: &str| (name == "pkg/msg/Msg").then(|| spec.clone());
                let _ = type_hash("pkg/msg/Msg", lookup);
            }
        }
    }
}
