//! How long CDR encoding and decoding of a 1440x1080 RGB image (4.6 MB)
//! take: `cargo run --release -p myelin-msgs --example image_cdr`.

use std::time::Instant;

use myelin::{Message, SharedBytes};
use myelin_msgs::sensor_msgs::Image;

fn main() {
    let image = Image {
        height: 1080,
        width: 1440,
        encoding: "rgb8".into(),
        step: 1440 * 3,
        data: vec![7u8; 1440 * 1080 * 3],
        ..Default::default()
    };
    let len = image.wire_len().unwrap();
    let mut buf = vec![0u8; len];
    let rounds = 50;
    let mut encode = Vec::new();
    let mut decode = Vec::new();
    for _ in 0..rounds {
        let t = Instant::now();
        image.wire_encode(&mut buf).unwrap();
        encode.push(t.elapsed());
        let bytes = SharedBytes::copy_from(&buf);
        let t = Instant::now();
        let back = Image::wire_decode(bytes).unwrap();
        decode.push(t.elapsed());
        assert_eq!(back.data.len(), image.data.len());
    }
    encode.sort();
    decode.sort();
    println!(
        "{len} bytes: encode median {:?}, decode median {:?} ({rounds} rounds; memcpy of the same bytes is the floor)",
        encode[rounds / 2],
        decode[rounds / 2]
    );
    let t = Instant::now();
    let mut copy = vec![0u8; len];
    for _ in 0..rounds {
        copy.copy_from_slice(&buf);
        std::hint::black_box(&copy);
    }
    println!("memcpy median-ish {:?}", t.elapsed() / rounds as u32);
}
