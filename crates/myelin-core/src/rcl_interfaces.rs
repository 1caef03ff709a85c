//! `rcl_interfaces`: the messages and services every ROS 2 node speaks
//! for its parameters (`~/get_parameters`, `/parameter_events`, ...) and
//! its log (`/rosout`), with their ROS names, REP-2011 hashes and CDR, so
//! `ros2 param` and ROS 2 nodes on rmw_zenoh talk to myelin nodes. The
//! message crate re-exports them (`myelin_msgs::rcl_interfaces`), where a
//! test checks every hash against the `.msg`/`.srv` definitions.
//!
//! ```
//! use myelin_core::Message;
//! use myelin_core::rcl_interfaces::{ParameterType, ParameterValue};
//!
//! let v = ParameterValue { r#type: ParameterType::PARAMETER_INTEGER, integer_value: 7, ..Default::default() };
//! assert_eq!(ParameterValue::TYPE_NAME, "rcl_interfaces/msg/ParameterValue");
//! let mut buf = vec![0u8; v.wire_len().unwrap()];
//! v.wire_encode(&mut buf).unwrap();
//! ```

use crate::time::Time;

use crate::message::{ros_msg, ros_srv};

ros_msg!(
    /// The kinds of value a parameter holds (its constants name
    /// [`ParameterValue::type`](ParameterValue)).
    ParameterType = "rcl_interfaces/msg/ParameterType",
        "RIHS01_df29ed057a834862187be24dd187d981790ff3ea6502f4cd27b432cbc42c6d46" {
        /// CDR gives an empty structure one byte, as ROS 2 does.
        structure_needs_at_least_one_member: u8,
    }
);

impl ParameterType {
    /// Not set (an undeclared or removed parameter).
    pub const PARAMETER_NOT_SET: u8 = 0;
    /// `bool_value`.
    pub const PARAMETER_BOOL: u8 = 1;
    /// `integer_value`.
    pub const PARAMETER_INTEGER: u8 = 2;
    /// `double_value`.
    pub const PARAMETER_DOUBLE: u8 = 3;
    /// `string_value`.
    pub const PARAMETER_STRING: u8 = 4;
    /// `byte_array_value`.
    pub const PARAMETER_BYTE_ARRAY: u8 = 5;
    /// `bool_array_value`.
    pub const PARAMETER_BOOL_ARRAY: u8 = 6;
    /// `integer_array_value`.
    pub const PARAMETER_INTEGER_ARRAY: u8 = 7;
    /// `double_array_value`.
    pub const PARAMETER_DOUBLE_ARRAY: u8 = 8;
    /// `string_array_value`.
    pub const PARAMETER_STRING_ARRAY: u8 = 9;
}

ros_msg!(
    /// A parameter's value as ROS 2 sends it: `type` says which field holds
    /// it ([`crate::parameter::ParameterValue`] is the Rust form).
    ParameterValue = "rcl_interfaces/msg/ParameterValue",
        "RIHS01_115fc089a387e23c7ecd3525c9189c379109119d6ab82e8dfbde0fdf6a7f9b68" {
        /// A [`ParameterType`] constant.
        r#type: u8,
        /// `PARAMETER_BOOL`.
        bool_value: bool,
        /// `PARAMETER_INTEGER`.
        integer_value: i64,
        /// `PARAMETER_DOUBLE`.
        double_value: f64,
        /// `PARAMETER_STRING`.
        string_value: String,
        /// `PARAMETER_BYTE_ARRAY`.
        byte_array_value: Vec<u8>,
        /// `PARAMETER_BOOL_ARRAY`.
        bool_array_value: Vec<bool>,
        /// `PARAMETER_INTEGER_ARRAY`.
        integer_array_value: Vec<i64>,
        /// `PARAMETER_DOUBLE_ARRAY`.
        double_array_value: Vec<f64>,
        /// `PARAMETER_STRING_ARRAY`.
        string_array_value: Vec<String>,
    }
);

ros_msg!(
    /// A named parameter value.
    Parameter = "rcl_interfaces/msg/Parameter",
        "RIHS01_ddfe6442cffc462317adb5c92536a7b6dd55858c5c3e1e328165a6b73c2831af" {
        /// The parameter's name.
        name: String,
        /// Its value.
        value: ParameterValue,
    }
);

ros_msg!(
    /// Allowed floating point values: `from_value` to `to_value`
    /// (inclusive) in steps of `step` (0: any value between).
    FloatingPointRange = "rcl_interfaces/msg/FloatingPointRange",
        "RIHS01_e6af23a23c177fee5f3075c8b1e435162a9b63c863d78c06017460b49684262d" {
        /// The lowest value.
        from_value: f64,
        /// The highest value.
        to_value: f64,
        /// The step from `from_value` (0: continuous).
        step: f64,
    }
);

ros_msg!(
    /// Allowed integer values: `from_value` to `to_value` (inclusive) in
    /// steps of `step` (0: any value between).
    IntegerRange = "rcl_interfaces/msg/IntegerRange",
        "RIHS01_f7b7fdc0f65f07702e099218e13288c3963bcb9345bde78b560e6cd19800fc5a" {
        /// The lowest value.
        from_value: i64,
        /// The highest value.
        to_value: i64,
        /// The step from `from_value` (0: any).
        step: u64,
    }
);

ros_msg!(
    /// What a parameter is: its type, a description, constraints.
    ParameterDescriptor = "rcl_interfaces/msg/ParameterDescriptor",
        "RIHS01_52175dbfda6c51153101d33d2a9da05743f66f02d5ab2ca9ec4709b46b73d704" {
        /// The parameter's name.
        name: String,
        /// Its [`ParameterType`].
        r#type: u8,
        /// What it is for, for a human.
        description: String,
        /// Constraints in words (not checked).
        additional_constraints: String,
        /// Set once, at declaration (or from an override).
        read_only: bool,
        /// Its type may change when it is set.
        dynamic_typing: bool,
        /// At most one range for a floating point parameter.
        floating_point_range: Vec<FloatingPointRange>,
        /// At most one range for an integer parameter.
        integer_range: Vec<IntegerRange>,
    }
);

ros_msg!(
    /// What changed in one node's parameters (published on
    /// `/parameter_events`).
    ParameterEvent = "rcl_interfaces/msg/ParameterEvent",
        "RIHS01_043e627780fcad87a22d225bc2a037361dba713fca6a6b9f4b869a5aa0393204" {
        /// When.
        stamp: Time,
        /// The node's fully qualified name.
        node: String,
        /// Parameters declared.
        new_parameters: Vec<Parameter>,
        /// Parameters set to a new value.
        changed_parameters: Vec<Parameter>,
        /// Parameters undeclared.
        deleted_parameters: Vec<Parameter>,
    }
);

ros_msg!(
    /// Whether setting a parameter worked, and why not.
    SetParametersResult = "rcl_interfaces/msg/SetParametersResult",
        "RIHS01_cfcc0fb0371ee5159b403960ef4300f8f9d2f1fd6117c8666b7f9654d528a9b1" {
        /// It was set.
        successful: bool,
        /// Why not, for a human.
        reason: String,
    }
);

ros_msg!(
    /// Parameter names, and the prefixes (namespaces) among them.
    ListParametersResult = "rcl_interfaces/msg/ListParametersResult",
        "RIHS01_237ae3428413dcbcfb452b510c42355f3a2b021dc091afa3e18526d57022f1cd" {
        /// The names.
        names: Vec<String>,
        /// Their prefixes.
        prefixes: Vec<String>,
    }
);

ros_msg!(
    /// One log line of a node (published on `/rosout`).
    Log = "rcl_interfaces/msg/Log",
        "RIHS01_e28ce254ca8abc06abf92773b74602cdbf116ed34fbaf294fb9f81da9f318eac" {
        /// When.
        stamp: Time,
        /// A level constant (`DEBUG` .. `FATAL`).
        level: u8,
        /// The logger's name (the node's).
        name: String,
        /// The text.
        msg: String,
        /// The source file.
        file: String,
        /// The function.
        function: String,
        /// The line.
        line: u32,
    }
);

impl Log {
    /// Debug level.
    pub const DEBUG: u8 = 10;
    /// Info level.
    pub const INFO: u8 = 20;
    /// Warning level.
    pub const WARN: u8 = 30;
    /// Error level.
    pub const ERROR: u8 = 40;
    /// Fatal level.
    pub const FATAL: u8 = 50;
}

ros_srv!(
    /// `~/get_parameters`: values by name (`PARAMETER_NOT_SET` for names
    /// not declared).
    GetParameters = "rcl_interfaces/srv/GetParameters",
        "RIHS01_bf9803d5c74cf989a5de3e0c2e99444599a627c7ff75f97b8c05b01003675cbc" {
        GetParametersRequest = "rcl_interfaces/srv/GetParameters_Request",
            "RIHS01_135a9e1c3d7cebef792f6687d7ddf99949b21a0bd9a320d863a9110a3f5cf4d6" {
            /// The names.
            names: Vec<String>,
        }
        GetParametersResponse = "rcl_interfaces/srv/GetParameters_Response",
            "RIHS01_9fa773b46e39cc5d02db6224d8fd520bb9caeeffc2b27c96c1e59431baba9f2a" {
            /// Their values, in the same order.
            values: Vec<ParameterValue>,
        }
    }
);

ros_srv!(
    /// `~/set_parameters`: set each on its own; a result for each.
    SetParameters = "rcl_interfaces/srv/SetParameters",
        "RIHS01_56eed9a67e169f9cb6c1f987bc88f868c14a8fc9f743a263bc734c154015d7e0" {
        SetParametersRequest = "rcl_interfaces/srv/SetParameters_Request",
            "RIHS01_130d46386b7e84ea9ecf60608a4d83cbe5e5cb7c6cc5b712b7a4e3a6c254e932" {
            /// What to set.
            parameters: Vec<Parameter>,
        }
        SetParametersResponse = "rcl_interfaces/srv/SetParameters_Response",
            "RIHS01_7a0e8140a0b8d98308fa81a5403a766e610af29a239caf54b7553227906fc266" {
            /// One per parameter, in order.
            results: Vec<SetParametersResult>,
        }
    }
);

ros_srv!(
    /// `~/set_parameters_atomically`: set all, or none.
    SetParametersAtomically = "rcl_interfaces/srv/SetParametersAtomically",
        "RIHS01_0e192ef259c07fc3c07a13191d27002222e65e00ccec653ca05e856f79285fcd" {
        SetParametersAtomicallyRequest = "rcl_interfaces/srv/SetParametersAtomically_Request",
            "RIHS01_db0bd950ed5ed867a0e90b225e44dea382d762c0762ff3e0ee842190042a59e5" {
            /// What to set.
            parameters: Vec<Parameter>,
        }
        SetParametersAtomicallyResponse = "rcl_interfaces/srv/SetParametersAtomically_Response",
            "RIHS01_31b1a38c5b0b9d893ee24da45f69638f4561c78461d82d52750f429b534502b8" {
            /// One result for all.
            result: SetParametersResult,
        }
    }
);

ros_srv!(
    /// `~/list_parameters`: names under prefixes, to a depth.
    ListParameters = "rcl_interfaces/srv/ListParameters",
        "RIHS01_3e6062bfbb27bfb8730d4cef2558221f51a11646d78e7bb30a1e83afac3aad9d" {
        ListParametersRequest = "rcl_interfaces/srv/ListParameters_Request",
            "RIHS01_a1b0b5d6b967a5b8ac5bc8563c3ea678f349e312a6a4967227c5a96bc5ce38df" {
            /// Only names under these (all when empty).
            prefixes: Vec<String>,
            /// How many `.`-separated levels below a prefix (0: all).
            depth: u64,
        }
        ListParametersResponse = "rcl_interfaces/srv/ListParameters_Response",
            "RIHS01_31b937b82de3612426be79f231e386259f97e8dc843e3f2845288b4bfa296bdd" {
            /// The names and prefixes.
            result: ListParametersResult,
        }
    }
);

impl ListParametersRequest {
    /// `depth` for every level.
    pub const DEPTH_RECURSIVE: u64 = 0;
}

ros_srv!(
    /// `~/describe_parameters`: descriptors by name.
    DescribeParameters = "rcl_interfaces/srv/DescribeParameters",
        "RIHS01_845b484d71eb0673dae682f2e3ba3c4851a65a3dcfb97bddd82c5b57e91e4cff" {
        DescribeParametersRequest = "rcl_interfaces/srv/DescribeParameters_Request",
            "RIHS01_05dd1c2bc87dec2627105c8070d6f9725c781a4f2ab852975bf105462b82b644" {
            /// The names.
            names: Vec<String>,
        }
        DescribeParametersResponse = "rcl_interfaces/srv/DescribeParameters_Response",
            "RIHS01_ad6747319613c6131589e062e095b469a46cc764f7d0f12a001a49e6cd893995" {
            /// Their descriptors, in order.
            descriptors: Vec<ParameterDescriptor>,
        }
    }
);

ros_srv!(
    /// `~/get_parameter_types`: types by name.
    GetParameterTypes = "rcl_interfaces/srv/GetParameterTypes",
        "RIHS01_da199c878688b3e530bdfe3ca8f74cb9fa0c303101e980a9e8f260e25e1c80ca" {
        GetParameterTypesRequest = "rcl_interfaces/srv/GetParameterTypes_Request",
            "RIHS01_87d7ec5ef545d4daa289d500025d31fb2437bc8b8365ca367161c4dac4be33fd" {
            /// The names.
            names: Vec<String>,
        }
        GetParameterTypesResponse = "rcl_interfaces/srv/GetParameterTypes_Response",
            "RIHS01_ac1335dce67c478e669434f6ac2fbff34fcd529580f272d3006785ba8b54e47f" {
            /// Their [`ParameterType`]s, in order.
            types: Vec<u8>,
        }
    }
);
