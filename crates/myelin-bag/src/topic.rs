//! What a bag knows of a topic.

use myelin::{Message, QoS};

/// A topic in a bag: its name, type, encoding, the QoS its publishers
/// offered (replayed with), and the type's ROS 2 hash.
#[derive(Debug, Clone, PartialEq)]
pub struct TopicInfo {
    /// The fully qualified topic name (`/chatter`).
    pub name: String,
    /// The type name (`std_msgs/msg/String`).
    pub type_name: String,
    /// How messages are encoded (`cdr` for ROS 2 types).
    pub serialization_format: String,
    /// The QoS of each publisher seen when recording (one profile per
    /// publisher, as rosbag2 stores them).
    pub offered_qos: Vec<QoS>,
    /// The REP-2011 type hash (`RIHS01_...`), when known.
    pub type_hash: Option<String>,
    /// The full `ros2msg` definition as a bag stores it (a read topic has
    /// its file's; `None` lets a [`Writer`](crate::Writer) look the type
    /// up in `myelin-msgs`).
    pub definition: Option<String>,
}

impl TopicInfo {
    /// A topic of the message type `T`, offered with ROS 2's default QoS
    /// (reliable, volatile, keep last 10).
    ///
    /// ```
    /// use myelin_msgs::std_msgs::String as RosString;
    /// let t = myelin_bag::TopicInfo::of::<RosString>("/chatter");
    /// assert_eq!(t.type_name, "std_msgs/msg/String");
    /// assert!(t.type_hash.unwrap().starts_with("RIHS01_"));
    /// ```
    pub fn of<T: Message>(name: &str) -> TopicInfo {
        TopicInfo {
            name: name.to_string(),
            type_name: T::TYPE_NAME.to_string(),
            serialization_format: "cdr".into(),
            offered_qos: vec![QoS::keep_last(10)],
            type_hash: T::ROS_TYPE_HASH.map(str::to_string),
            definition: None,
        }
    }

    /// The QoS a player publishes this topic with: the recorded profile
    /// when every publisher offered the same one (else the most
    /// compatible: best effort if any was, volatile if any was, as
    /// `ros2 bag play` adapts), keep last 10 with none recorded.
    pub fn replay_qos(&self) -> QoS {
        let Some(first) = self.offered_qos.first() else {
            return QoS::keep_last(10);
        };
        if self.offered_qos.iter().all(|q| q == first) {
            return *first;
        }
        let mut q = *first;
        if self
            .offered_qos
            .iter()
            .any(|p| p.reliability == myelin::Reliability::BestEffort)
        {
            q = q.best_effort();
        }
        if self
            .offered_qos
            .iter()
            .any(|p| p.durability == myelin::Durability::Volatile)
        {
            q = q.volatile();
        }
        q
    }
}
