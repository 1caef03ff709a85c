//! The common ROS 2 message types for myelin, with their ROS type names
//! and the CDR encoding ROS 2 puts on the wire (so they cross processes
//! and, with the zenoh transport, reach ROS 2 nodes).
//!
//! Field names, types and order follow the `.msg` definitions of ROS 2
//! Jazzy; fixed-size arrays are Rust arrays (no length on the wire),
//! sequences are `Vec`s (a `u32` count). Every type is `Default`, `Clone`,
//! `PartialEq`, serde and [`myelin::Message`].
//!
//! ```
//! use myelin::Message;
//! use myelin_msgs::geometry_msgs::{Point, Pose, Quaternion};
//! use myelin_msgs::std_msgs;
//!
//! let pose = Pose {
//!     position: Point { x: 1.0, y: 2.0, z: 0.0 },
//!     orientation: Quaternion { w: 1.0, ..Default::default() },
//! };
//! assert_eq!(Pose::TYPE_NAME, "geometry_msgs/msg/Pose");
//! let hello = std_msgs::String { data: "hello".into() };
//! let mut buf = vec![0u8; hello.wire_len().unwrap()];
//! hello.wire_encode(&mut buf).unwrap();
//! // CDR little endian: header, length 6 (with the NUL), "hello", NUL.
//! assert_eq!(buf, [0, 1, 0, 0, 6, 0, 0, 0, b'h', b'e', b'l', b'l', b'o', 0]);
//! # let _ = pose;
//! ```
//!
//! Your own types: `#[derive(Clone, serde::Serialize, serde::Deserialize,
//! myelin::Message)]` with `#[message(cdr, name = "my_pkg/msg/MyType")]`.

#![warn(missing_docs)]

macro_rules! msg {
    ($(#[$doc:meta])* $name:ident = $ros:literal { $($(#[$fdoc:meta])* $field:ident : $ty:ty),* $(,)? }) => {
        $(#[$doc])*
        #[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize, myelin::Message)]
        #[message(cdr, name = $ros)]
        #[serde(default)]
        pub struct $name {
            $($(#[$fdoc])* pub $field: $ty,)*
        }
    };
}

/// `builtin_interfaces`: time.
pub mod builtin_interfaces {
    msg!(
        /// A point in time (seconds and nanoseconds since the epoch).
        Time = "builtin_interfaces/msg/Time" {
            /// Seconds.
            sec: i32,
            /// Nanoseconds (0..1e9).
            nanosec: u32,
        }
    );
    msg!(
        /// A span of time.
        Duration = "builtin_interfaces/msg/Duration" {
            /// Seconds.
            sec: i32,
            /// Nanoseconds (0..1e9).
            nanosec: u32,
        }
    );

    impl Time {
        /// The current wall-clock time.
        pub fn now() -> Time {
            let d = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default();
            Time {
                sec: d.as_secs().min(i32::MAX as u64) as i32,
                nanosec: d.subsec_nanos(),
            }
        }
    }
}

/// `std_msgs`: basic types and the standard header.
pub mod std_msgs {
    use super::builtin_interfaces::Time;

    msg!(
        /// Timestamp and coordinate frame of a stamped message.
        Header = "std_msgs/msg/Header" {
            /// When the data was taken.
            stamp: Time,
            /// The coordinate frame.
            frame_id: std::string::String,
        }
    );
    msg!(
        /// A string.
        String = "std_msgs/msg/String" {
            /// The text.
            data: std::string::String,
        }
    );
    msg!(
        /// A boolean.
        Bool = "std_msgs/msg/Bool" {
            /// The value.
            data: bool,
        }
    );
    msg!(
        /// A 32-bit signed integer.
        Int32 = "std_msgs/msg/Int32" {
            /// The value.
            data: i32,
        }
    );
    msg!(
        /// A 64-bit signed integer.
        Int64 = "std_msgs/msg/Int64" {
            /// The value.
            data: i64,
        }
    );
    msg!(
        /// A 32-bit float.
        Float32 = "std_msgs/msg/Float32" {
            /// The value.
            data: f32,
        }
    );
    msg!(
        /// A 64-bit float.
        Float64 = "std_msgs/msg/Float64" {
            /// The value.
            data: f64,
        }
    );
    msg!(
        /// Nothing (a ping).
        Empty = "std_msgs/msg/Empty" {
            /// CDR gives an empty structure one byte, as ROS 2 does.
            structure_needs_at_least_one_member: u8,
        }
    );
}

/// `geometry_msgs`: points, poses, twists, transforms.
pub mod geometry_msgs {
    use super::std_msgs::Header;

    msg!(
        /// A position.
        Point = "geometry_msgs/msg/Point" { /// x.
            x: f64, /// y.
            y: f64, /// z.
            z: f64 }
    );
    msg!(
        /// A direction or velocity.
        Vector3 = "geometry_msgs/msg/Vector3" { /// x.
            x: f64, /// y.
            y: f64, /// z.
            z: f64 }
    );
    msg!(
        /// An orientation (unit quaternion).
        Quaternion = "geometry_msgs/msg/Quaternion" { /// x.
            x: f64, /// y.
            y: f64, /// z.
            z: f64, /// w.
            w: f64 }
    );
    msg!(
        /// Position and orientation.
        Pose = "geometry_msgs/msg/Pose" { /// Position.
            position: Point, /// Orientation.
            orientation: Quaternion }
    );
    msg!(
        /// A pose with a header.
        PoseStamped = "geometry_msgs/msg/PoseStamped" { /// Header.
            header: Header, /// Pose.
            pose: Pose }
    );
    msg!(
        /// Linear and angular velocity.
        Twist = "geometry_msgs/msg/Twist" { /// Linear (m/s).
            linear: Vector3, /// Angular (rad/s).
            angular: Vector3 }
    );
    msg!(
        /// A twist with a header.
        TwistStamped = "geometry_msgs/msg/TwistStamped" { /// Header.
            header: Header, /// Twist.
            twist: Twist }
    );
    msg!(
        /// A rigid transform.
        Transform = "geometry_msgs/msg/Transform" { /// Translation.
            translation: Vector3, /// Rotation.
            rotation: Quaternion }
    );
    msg!(
        /// A transform between two frames.
        TransformStamped = "geometry_msgs/msg/TransformStamped" { /// Header (parent frame).
            header: Header, /// Child frame.
            child_frame_id: String, /// Transform.
            transform: Transform }
    );
}

/// `sensor_msgs`: cameras, IMUs, lidars, point clouds.
pub mod sensor_msgs {
    use super::geometry_msgs::{Quaternion, Vector3};
    use super::std_msgs::Header;

    msg!(
        /// An uncompressed image.
        Image = "sensor_msgs/msg/Image" { /// Header.
            header: Header, /// Rows.
            height: u32, /// Columns.
            width: u32, /// Pixel encoding, e.g. `rgb8`.
            encoding: String, /// Big-endian data.
            is_bigendian: u8, /// Bytes per row.
            step: u32, /// Pixels.
            data: Vec<u8> }
    );
    msg!(
        /// A compressed image.
        CompressedImage = "sensor_msgs/msg/CompressedImage" { /// Header.
            header: Header, /// `jpeg` or `png`.
            format: String, /// The compressed bytes.
            data: Vec<u8> }
    );
    msg!(
        /// An inertial measurement.
        Imu = "sensor_msgs/msg/Imu" { /// Header.
            header: Header, /// Orientation.
            orientation: Quaternion, /// Row-major 3x3 covariance.
            orientation_covariance: [f64; 9], /// Angular velocity (rad/s).
            angular_velocity: Vector3, /// Covariance.
            angular_velocity_covariance: [f64; 9], /// Linear acceleration (m/s^2).
            linear_acceleration: Vector3, /// Covariance.
            linear_acceleration_covariance: [f64; 9] }
    );
    msg!(
        /// A planar laser scan.
        LaserScan = "sensor_msgs/msg/LaserScan" { /// Header.
            header: Header, /// Start angle (rad).
            angle_min: f32, /// End angle (rad).
            angle_max: f32, /// Angular step (rad).
            angle_increment: f32, /// Time between measurements (s).
            time_increment: f32, /// Time between scans (s).
            scan_time: f32, /// Minimum range (m).
            range_min: f32, /// Maximum range (m).
            range_max: f32, /// Ranges (m).
            ranges: Vec<f32>, /// Intensities.
            intensities: Vec<f32> }
    );
    msg!(
        /// One field of a point cloud's points.
        PointField = "sensor_msgs/msg/PointField" { /// Name.
            name: String, /// Byte offset in the point.
            offset: u32, /// Type (1 INT8 .. 8 FLOAT64).
            datatype: u8, /// Elements.
            count: u32 }
    );
    msg!(
        /// A point cloud.
        PointCloud2 = "sensor_msgs/msg/PointCloud2" { /// Header.
            header: Header, /// Rows.
            height: u32, /// Columns.
            width: u32, /// The point layout.
            fields: Vec<PointField>, /// Big-endian data.
            is_bigendian: bool, /// Bytes per point.
            point_step: u32, /// Bytes per row.
            row_step: u32, /// Points.
            data: Vec<u8>, /// No invalid points.
            is_dense: bool }
    );
    msg!(
        /// A region of interest in an image.
        RegionOfInterest = "sensor_msgs/msg/RegionOfInterest" { /// Left edge.
            x_offset: u32, /// Top edge.
            y_offset: u32, /// Height.
            height: u32, /// Width.
            width: u32, /// Rectify first.
            do_rectify: bool }
    );
    msg!(
        /// Camera calibration.
        CameraInfo = "sensor_msgs/msg/CameraInfo" { /// Header.
            header: Header, /// Rows.
            height: u32, /// Columns.
            width: u32, /// Distortion model name.
            distortion_model: String, /// Distortion parameters.
            d: Vec<f64>, /// Intrinsics (3x3).
            k: [f64; 9], /// Rectification (3x3).
            r: [f64; 9], /// Projection (3x4).
            p: [f64; 12], /// Horizontal binning.
            binning_x: u32, /// Vertical binning.
            binning_y: u32, /// Region of interest.
            roi: RegionOfInterest }
    );
}
