//! Every type round-trips through its wire encoding, and a few match byte
//! vectors derived by hand from the CDR rules (little endian, 4-byte
//! encapsulation header, primitives aligned to their size from the end of
//! the header, strings as u32 length with the NUL + bytes + NUL).

use myelin::{Message, SharedBytes};
use myelin_msgs::builtin_interfaces::{Duration, Time};
use myelin_msgs::geometry_msgs::*;
use myelin_msgs::sensor_msgs::*;
use myelin_msgs::std_msgs::{self, Header};

fn encode<T: Message>(v: &T) -> Vec<u8> {
    let mut buf = vec![0u8; v.wire_len().unwrap()];
    v.wire_encode(&mut buf).unwrap();
    buf
}

fn round_trip<T: Message + PartialEq + std::fmt::Debug>(v: T) {
    let bytes = encode(&v);
    assert_eq!(
        T::wire_decode(SharedBytes::copy_from(&bytes)).unwrap(),
        v,
        "{}",
        T::TYPE_NAME
    );
}

fn header(frame: &str) -> Header {
    Header {
        stamp: Time { sec: 7, nanosec: 9 },
        frame_id: frame.into(),
    }
}

#[test]
fn every_type_round_trips() {
    round_trip(Time {
        sec: -1,
        nanosec: 5,
    });
    round_trip(Duration { sec: 3, nanosec: 1 });
    round_trip(header("base_link"));
    round_trip(std_msgs::String {
        data: "héllo".into(),
    });
    round_trip(std_msgs::Bool { data: true });
    round_trip(std_msgs::Int32 { data: -42 });
    round_trip(std_msgs::Int64 { data: i64::MIN });
    round_trip(std_msgs::Float32 { data: 1.5 });
    round_trip(std_msgs::Float64 { data: -2.25 });
    round_trip(std_msgs::Empty::default());
    let p = Point {
        x: 1.0,
        y: 2.0,
        z: 3.0,
    };
    let q = Quaternion {
        x: 0.0,
        y: 0.0,
        z: 0.5,
        w: 0.5,
    };
    let v = Vector3 {
        x: -1.0,
        y: 0.5,
        z: 9.81,
    };
    round_trip(p.clone());
    round_trip(v.clone());
    round_trip(q.clone());
    let pose = Pose {
        position: p,
        orientation: q.clone(),
    };
    round_trip(pose.clone());
    round_trip(PoseStamped {
        header: header("map"),
        pose,
    });
    let twist = Twist {
        linear: v.clone(),
        angular: v.clone(),
    };
    round_trip(twist.clone());
    round_trip(TwistStamped {
        header: header("odom"),
        twist,
    });
    let tf = Transform {
        translation: v.clone(),
        rotation: q.clone(),
    };
    round_trip(tf.clone());
    round_trip(TransformStamped {
        header: header("map"),
        child_frame_id: "base".into(),
        transform: tf,
    });
    round_trip(Image {
        header: header("cam"),
        height: 2,
        width: 3,
        encoding: "rgb8".into(),
        is_bigendian: 0,
        step: 9,
        data: (0..18).collect(),
    });
    round_trip(CompressedImage {
        header: header("cam"),
        format: "jpeg".into(),
        data: vec![0xff, 0xd8],
    });
    round_trip(Imu {
        header: header("imu"),
        orientation: q,
        orientation_covariance: [0.1; 9],
        angular_velocity: v.clone(),
        angular_velocity_covariance: [0.2; 9],
        linear_acceleration: v,
        linear_acceleration_covariance: [0.3; 9],
    });
    round_trip(LaserScan {
        header: header("laser"),
        angle_min: -1.5,
        angle_max: 1.5,
        angle_increment: 0.01,
        ranges: vec![1.0, 2.0, f32::INFINITY],
        intensities: vec![],
        ..Default::default()
    });
    round_trip(PointCloud2 {
        header: header("lidar"),
        height: 1,
        width: 2,
        fields: vec![PointField {
            name: "x".into(),
            offset: 0,
            datatype: 7,
            count: 1,
        }],
        is_bigendian: false,
        point_step: 4,
        row_step: 8,
        data: vec![1; 8],
        is_dense: true,
    });
    round_trip(CameraInfo {
        header: header("cam"),
        height: 1080,
        width: 1440,
        distortion_model: "plumb_bob".into(),
        d: vec![0.1, 0.01, 0.0, 0.0, 0.0],
        k: [1.0; 9],
        r: [0.0; 9],
        p: [2.0; 12],
        binning_x: 1,
        binning_y: 1,
        roi: RegionOfInterest {
            x_offset: 1,
            y_offset: 2,
            height: 3,
            width: 4,
            do_rectify: true,
        },
    });
}

#[test]
fn string_matches_hand_derived_bytes() {
    assert_eq!(
        encode(&std_msgs::String { data: "hi".into() }),
        [0, 1, 0, 0, 3, 0, 0, 0, b'h', b'i', 0]
    );
}

#[test]
fn header_matches_hand_derived_bytes() {
    // stamp.sec i32 = 1, stamp.nanosec u32 = 2, frame_id "map": len 4 + "map\0".
    let h = Header {
        stamp: Time { sec: 1, nanosec: 2 },
        frame_id: "map".into(),
    };
    assert_eq!(
        encode(&h),
        [
            0, 1, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 4, 0, 0, 0, b'm', b'a', b'p', 0
        ]
    );
}

#[test]
fn image_header_fields_are_laid_out_as_cdr_says() {
    let img = Image {
        header: Header {
            stamp: Time { sec: 1, nanosec: 2 },
            frame_id: "c".into(),
        },
        height: 480,
        width: 640,
        encoding: "rgb8".into(),
        is_bigendian: 0,
        step: 1920,
        data: vec![7, 8, 9],
    };
    let b = encode(&img);
    let expect: Vec<u8> = [
        &[0u8, 1, 0, 0][..],    // encapsulation: CDR little endian
        &1i32.to_le_bytes(),    // stamp.sec (offset 0)
        &2u32.to_le_bytes(),    // stamp.nanosec (4)
        &2u32.to_le_bytes(),    // frame_id length incl. NUL (8)
        b"c\0",                 // (12..14)
        &[0, 0],                // pad to 4 (14..16)
        &480u32.to_le_bytes(),  // height (16)
        &640u32.to_le_bytes(),  // width (20)
        &5u32.to_le_bytes(),    // encoding length (24)
        b"rgb8\0",              // (28..33)
        &[0],                   // is_bigendian u8 (33)
        &[0, 0],                // pad to 4 (34..36)
        &1920u32.to_le_bytes(), // step (36)
        &3u32.to_le_bytes(),    // data length (40)
        &[7, 8, 9],             // data (44..47)
    ]
    .concat();
    assert_eq!(b, expect);
}

#[test]
fn types_carry_their_ros_names() {
    assert_eq!(std_msgs::String::TYPE_NAME, "std_msgs/msg/String");
    assert_eq!(PoseStamped::TYPE_NAME, "geometry_msgs/msg/PoseStamped");
    assert_eq!(PointCloud2::TYPE_NAME, "sensor_msgs/msg/PointCloud2");
    assert_eq!(Time::TYPE_NAME, "builtin_interfaces/msg/Time");
}

/// Service requests and responses are CDR messages like any other:
/// `AddTwoInts`'s request is two aligned int64s after the header, exactly
/// what a ROS 2 client sends in its zenoh query.
#[test]
fn service_messages_are_cdr_as_ros_2_sends_them() {
    use myelin_msgs::example_interfaces::{AddTwoIntsRequest, AddTwoIntsResponse};
    use myelin_msgs::std_srvs::TriggerResponse;
    let mut want = vec![0, 1, 0, 0];
    want.extend(2i64.to_le_bytes());
    want.extend((-3i64).to_le_bytes());
    assert_eq!(encode(&AddTwoIntsRequest { a: 2, b: -3 }), want);
    round_trip(AddTwoIntsResponse { sum: -1 });
    round_trip(TriggerResponse {
        success: true,
        message: "done".into(),
    });
    round_trip(myelin_msgs::service_msgs::ServiceEventInfo {
        event_type: 1,
        stamp: myelin_msgs::builtin_interfaces::Time { sec: 1, nanosec: 2 },
        client_gid: [7; 16],
        sequence_number: 42,
    });
}
