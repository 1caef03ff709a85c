//! The messages of type descriptions (REP 2016) and what a node keeps
//! of the types it uses: see [`crate::type_description`].

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use crate::message::{ros_msg, ros_srv};

ros_msg!(
    /// The type of a field (`type_id` is a `FIELD_TYPE_*` number: 1
    /// nested, 2-22 primitives and strings; plus 48 for a fixed array, 96
    /// for a bounded sequence, 144 for an unbounded one).
    FieldType = "type_description_interfaces/msg/FieldType",
        "RIHS01_a70b6dd919645a03a3586f7f821defbc886ea3e531a1d95cc0f380a3973ccaa6" {
        /// A `FIELD_TYPE_*` number.
        type_id: u8,
        /// The array size or sequence bound (0: none).
        capacity: u64,
        /// The bound of a bounded string (0: none).
        string_capacity: u64,
        /// `pkg/msg/Type` of a nested type.
        nested_type_name: String,
    }
);

impl FieldType {
    /// A nested message type.
    pub const FIELD_TYPE_NESTED_TYPE: u8 = 1;
    /// `string`.
    pub const FIELD_TYPE_STRING: u8 = 17;
    /// `string<=N`.
    pub const FIELD_TYPE_BOUNDED_STRING: u8 = 21;
    /// Add to a base type for a fixed-size array (`T[N]`).
    pub const ARRAY_OFFSET: u8 = 48;
    /// Add to a base type for a bounded sequence (`T[<=N]`).
    pub const BOUNDED_SEQUENCE_OFFSET: u8 = 96;
    /// Add to a base type for an unbounded sequence (`T[]`).
    pub const UNBOUNDED_SEQUENCE_OFFSET: u8 = 144;
}

ros_msg!(
    /// One field: name, type, default value as the `.msg` writes it.
    Field = "type_description_interfaces/msg/Field",
        "RIHS01_c0b01379cd4226281285ccaf6be46653968f855f7c5e41614ff5d7a854efef7c" {
        /// The field's name.
        name: String,
        /// Its type.
        r#type: FieldType,
        /// Its default (empty: none).
        default_value: String,
    }
);

ros_msg!(
    /// One type without the types it refers to.
    IndividualTypeDescription = "type_description_interfaces/msg/IndividualTypeDescription",
        "RIHS01_55c827d86c3c141bdd318fe6c22e11190e4d3b37c8f4f9751a084aa05ce96560" {
        /// `pkg/msg/Type`.
        type_name: String,
        /// Its fields in order.
        fields: Vec<Field>,
    }
);

ros_msg!(
    /// A type and every type it refers to, directly or not (sorted by
    /// name): what its REP-2011 hash is computed from.
    TypeDescription = "type_description_interfaces/msg/TypeDescription",
        "RIHS01_739f2508c9fa3a6f330913ff5b9d25fb74159a077da71e1087f51a60c12a080b" {
        /// The type.
        type_description: IndividualTypeDescription,
        /// What it refers to.
        referenced_type_descriptions: Vec<IndividualTypeDescription>,
    }
);

ros_msg!(
    /// The text a type comes from.
    TypeSource = "type_description_interfaces/msg/TypeSource",
        "RIHS01_faeaec7596c04ecf5b6e99ad225e4c7cbb997ad5435f793526fb3984d011aae5" {
        /// `pkg/msg/Type`.
        type_name: String,
        /// `msg`, `srv`, `action`, or `implicit` for a derived type
        /// (a service's request, an action's feedback message).
        encoding: String,
        /// The file's text (empty for an implicit type).
        raw_file_contents: String,
    }
);

ros_msg!(
    /// A key and its value.
    KeyValue = "type_description_interfaces/msg/KeyValue",
        "RIHS01_274fe56bf14f33c7512e34c646a37579ee36779f745f049a9760763e817f0c42" {
        /// The key.
        key: String,
        /// The value.
        value: String,
    }
);

ros_srv!(
    /// Ask a node for the description of a type it uses: every node's
    /// `~/get_type_description`.
    GetTypeDescription = "type_description_interfaces/srv/GetTypeDescription",
        "RIHS01_69b9c19c1021405984cc60dbbb1edceb147a6538b411d812ba6afabeed962cd5" {
        GetTypeDescriptionRequest = "type_description_interfaces/srv/GetTypeDescription_Request",
            "RIHS01_470f56ccbcf13d55c78c8b735fb12da03e639e5acded994426c89d94778d9e28" {
            /// `pkg/msg/Type` (or `pkg/srv/...`, `pkg/action/...`).
            type_name: String,
            /// Its `RIHS01_...` hash; empty: any.
            type_hash: String,
            /// Also send the source files.
            include_type_sources: bool,
        }
        GetTypeDescriptionResponse = "type_description_interfaces/srv/GetTypeDescription_Response",
            "RIHS01_648c49d976240861a482f961c5621ddd0d2135d8cce6f297a76d4f6376d93b75" {
            /// Whether the node has the type.
            successful: bool,
            /// Why not.
            failure_reason: String,
            /// The type.
            type_description: TypeDescription,
            /// Its files, if asked.
            type_sources: Vec<TypeSource>,
            /// Nothing yet.
            extra_information: Vec<KeyValue>,
        }
    }
);

/// A type's description and sources, as a type hands them to its nodes.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Described {
    /// The type and what it refers to.
    pub description: TypeDescription,
    /// The files they come from.
    pub sources: Vec<TypeSource>,
}

/// The described types a node uses, and the service that tells them.
#[derive(Default)]
pub(crate) struct NodeTypes {
    /// By name: the hash and the description.
    pub(crate) types: BTreeMap<String, (String, Arc<Described>)>,
    /// `~/get_type_description`, made with the first type (dropped with
    /// the node's last handle: it holds the node).
    pub(crate) service: Option<Box<dyn std::any::Any + Send + Sync>>,
}

impl NodeTypes {
    /// The answer to `req`.
    pub(crate) fn answer(&self, req: &GetTypeDescriptionRequest) -> GetTypeDescriptionResponse {
        let fail = |why: String| GetTypeDescriptionResponse {
            successful: false,
            failure_reason: why,
            ..Default::default()
        };
        let Some((hash, d)) = self.types.get(&req.type_name) else {
            return fail(format!("type {:?} is not used by this node", req.type_name));
        };
        if !req.type_hash.is_empty() && req.type_hash != *hash {
            return fail(format!(
                "this node has {} with hash {hash}, not {}",
                req.type_name, req.type_hash
            ));
        }
        GetTypeDescriptionResponse {
            successful: true,
            failure_reason: String::new(),
            type_description: d.description.clone(),
            type_sources: if req.include_type_sources {
                d.sources.clone()
            } else {
                Vec::new()
            },
            extra_information: Vec::new(),
        }
    }
}

/// The `Mutex` a node keeps its types in.
pub(crate) type NodeTypesCell = Mutex<NodeTypes>;
