//! Nodes: named groups of publishers, subscriptions and timers.

mod logger;
mod parameters;
mod remote_services;
pub(crate) mod type_descriptions;

pub use logger::Logger;
pub use parameters::OnSetParametersHandle;

use std::sync::{Arc, Weak};
use std::time::Duration;

use crate::dispatch::GroupInner;
use crate::error::{CreateEndpointError, CreateServiceError, CreateTimerError};
use crate::events::EventQueue;
use crate::group::{CallbackGroup, CallbackGroupKind};
use crate::introspection::{EventSink, MakeSink, ServiceTypeRef};
use crate::message::Message;
use crate::names::{self, NameKind};
use crate::publisher::{PubInner, Publisher, PublisherOptions};
use crate::qos::LivelinessKind;
use crate::qos::QoS;
use crate::qos::QosPolicy;
use crate::runtime::NodeInner;
use crate::service::{Client, ClientInner, Handler, Service, ServiceInner, ServiceOptions};
use crate::subscription::{
    BufferKind, Delivery, SubInner, SubSpec, Subscription, SubscriptionCallback,
    SubscriptionOptions,
};
use crate::timer::{Timer, TimerInfo, TimerInner, without_info};
use crate::transport::{
    EndpointSpec, NodeIdent, PubLink, PubOwner, SubLink, SubOwner, Transport, TransportError,
    TypeInfo,
};

/// A node. Cheap to clone (a handle); entities keep their node alive.
///
/// ```
/// use std::time::Duration;
/// use myelin_core::{Context, Executor, QoS};
///
/// let ctx = Context::builder().handle_signals(false).build()?;
/// let node = ctx.create_node("lidar_driver")?;
/// let scans = node.create_publisher::<Vec<u8>>("scan", QoS::keep_last(5))?;
/// let _tick = node.create_wall_timer(Duration::from_millis(10), move || {
///     let _ = scans.publish(vec![0; 16]);
/// })?;
/// let heard = node.create_polling_subscription::<Vec<u8>>("scan", QoS::keep_last(5), Default::default())?;
/// let mut executor = Executor::new();
/// executor.add_node(&node)?;
/// executor.spin_until(Duration::from_secs(5), || heard.buffered() > 0)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct Node {
    pub(crate) inner: Arc<NodeInner>,
    /// Shared by the handles given to the program (`None` in handles
    /// myelin makes for itself): when the last goes, what serves the
    /// node's parameters goes too.
    pub(crate) _user: Option<Arc<UserHandle>>,
}

/// The program's hold on a node (see [`Node`]'s `_user`).
pub(crate) struct UserHandle {
    pub(crate) node: std::sync::Weak<NodeInner>,
}

impl Drop for UserHandle {
    fn drop(&mut self) {
        if let Some(n) = self.node.upgrade() {
            let served = n
                .param_entities
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .take();
            let rosout = n.rosout.lock().unwrap_or_else(|e| e.into_inner()).take();
            let types = n
                .types
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .service
                .take();
            drop((served, rosout, types));
        }
    }
}

impl Node {
    /// The node's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The node's namespace (absolute, e.g. `/` or `/robot1`).
    pub fn namespace(&self) -> &str {
        &self.inner.namespace
    }

    /// The fully qualified name (`/robot1/camera`).
    pub fn fully_qualified_name(&self) -> &str {
        &self.inner.fqn
    }

    /// Resolve a topic name as this node sees it: relative names are put in
    /// the node's namespace, `~/x` under the node's own name.
    pub fn resolve_topic_name(&self, topic: &str) -> Result<String, names::NameError> {
        let n = &self.inner;
        let expanded = names::expand_topic_name(topic, &n.name, &n.namespace, NameKind::Topic)?;
        Ok(n.ctx.remaps.name(
            expanded,
            &n.created_as,
            &n.name,
            &n.namespace,
            NameKind::Topic,
        ))
    }

    fn check_ctx(&self, topic: &str) -> Result<(), CreateEndpointError> {
        if self.inner.ctx.is_shut_down() {
            return Err(CreateEndpointError::ContextShutDown(topic.to_string()));
        }
        Ok(())
    }

    /// Refuse QoS numbers no buffer or timer can be built from.
    fn check_qos(topic: &str, qos: &QoS) -> Result<(), CreateEndpointError> {
        qos.validate()
            .map_err(|(policy, reason)| CreateEndpointError::InvalidQos {
                topic: topic.to_string(),
                policy,
                reason,
            })
    }

    /// Create a publisher on `topic` (resolved as in
    /// [`resolve_topic_name`](Self::resolve_topic_name)).
    pub fn create_publisher<T: Message>(
        &self,
        topic: &str,
        qos: QoS,
    ) -> Result<Publisher<T>, CreateEndpointError> {
        self.create_publisher_with(topic, qos, PublisherOptions::default())
    }

    /// [`create_publisher`](Self::create_publisher) with options (an event
    /// callback for deadline, matched and incompatible-QoS events).
    pub fn create_publisher_with<T: Message>(
        &self,
        topic: &str,
        qos: QoS,
        options: PublisherOptions,
    ) -> Result<Publisher<T>, CreateEndpointError> {
        let p = self.make_publisher(topic, qos, options, TypeInfo::of::<T>())?;
        self.uses_type::<T>();
        Ok(p)
    }

    /// Note a described message type this node uses (for
    /// `~/get_type_description`).
    fn uses_type<T: Message>(&self) {
        type_descriptions::register(
            self,
            T::TYPE_NAME,
            T::ROS_TYPE_HASH,
            T::ros_type_description,
        );
    }

    /// Note a described service type this node uses.
    fn uses_service_type<S: crate::ServiceType>(&self) {
        type_descriptions::register(
            self,
            S::TYPE_NAME,
            S::ROS_TYPE_HASH,
            S::ros_type_description,
        );
    }

    /// A publisher of bytes as the message type `ty` names (known at run
    /// time, e.g. from a recorded bag): subscriptions of that type in other
    /// processes and hosts receive each [`AnyMessage`](crate::AnyMessage)
    /// published as if a typed publisher had sent those bytes, so the
    /// bytes must be the type's wire encoding (CDR for a ROS type). It is
    /// what `myelin bag play` republishes with. In this context it only
    /// meets other `AnyMessage` endpoints: a typed endpoint of the topic in
    /// the same context is a [`CreateEndpointError::TypeMismatch`].
    ///
    /// ```
    /// use myelin_core::{AnyMessage, Context, QoS, RawType};
    ///
    /// let ctx = Context::builder().shared_memory(false).network(false).build().unwrap();
    /// let node = ctx.create_node("player").unwrap();
    /// let ty = RawType::ros(
    ///     "std_msgs/msg/String",
    ///     "RIHS01_df668c740482bbd48fb39d76a70dfd4bd59db1288021743503259e948f6b1a18",
    /// )
    /// .unwrap();
    /// let p = node.create_raw_publisher("chatter", &ty, QoS::keep_last(10)).unwrap();
    /// // CDR of std_msgs/String "hi": encapsulation, length 3, "hi\0".
    /// let cdr: &[u8] = &[0, 1, 0, 0, 3, 0, 0, 0, b'h', b'i', 0];
    /// p.publish(AnyMessage(cdr.into())).unwrap();
    /// ```
    pub fn create_raw_publisher(
        &self,
        topic: &str,
        ty: &crate::RawType,
        qos: QoS,
    ) -> Result<Publisher<crate::AnyMessage>, CreateEndpointError> {
        self.create_raw_publisher_with(topic, ty, qos, PublisherOptions::default())
    }

    /// [`create_raw_publisher`](Self::create_raw_publisher) with options
    /// (an event callback, a callback group).
    ///
    /// ```
    /// use myelin_core::{Context, PublisherOptions, QoS, RawType};
    ///
    /// let ctx = Context::builder().shared_memory(false).network(false).build().unwrap();
    /// let node = ctx.create_node("bridge").unwrap();
    /// let ty = RawType::ros(
    ///     "std_msgs/msg/String",
    ///     "RIHS01_df668c740482bbd48fb39d76a70dfd4bd59db1288021743503259e948f6b1a18",
    /// )
    /// .unwrap();
    /// let options = PublisherOptions::default().on_event(|e| println!("{e:?}"));
    /// let p = node.create_raw_publisher_with("chatter", &ty, QoS::keep_last(10), options).unwrap();
    /// # drop(p);
    /// ```
    pub fn create_raw_publisher_with(
        &self,
        topic: &str,
        ty: &crate::RawType,
        qos: QoS,
        options: PublisherOptions,
    ) -> Result<Publisher<crate::AnyMessage>, CreateEndpointError> {
        self.make_publisher(topic, qos, options, TypeInfo::of_raw(ty))
    }

    fn make_publisher<T: Message>(
        &self,
        topic: &str,
        qos: QoS,
        options: PublisherOptions,
        ty: TypeInfo,
    ) -> Result<Publisher<T>, CreateEndpointError> {
        let topic = self.resolve_topic_name(topic)?;
        self.check_ctx(&topic)?;
        Self::check_qos(&topic, &qos)?;
        let group = options
            .callback_group
            .as_ref()
            .unwrap_or(&self.inner.default_group)
            .inner
            .clone();
        let id = self.inner.ctx.new_id();
        let (serial, gid) = self.new_gid();
        let spec = self.spec(id, (serial, gid), &topic, &qos, ty);
        let links = self.links::<dyn PubLink>(&spec, |t, spec| t.publisher(spec))?;
        let events = self.event_queue(&options.event_callback, &group, "publisher", &topic);
        let inner = Arc::new(PubInner::new(
            id,
            gid,
            topic.clone(),
            qos,
            self.inner.clone(),
            events,
            links,
        ));
        if let Some(d) = qos.deadline {
            let w = Arc::downgrade(&inner);
            let mut last = 0;
            let t = self.checker(&topic, d, QosPolicy::Deadline, &group, move || {
                if let Some(p) = w.upgrade() {
                    p.check_deadline(&mut last);
                }
            })?;
            inner
                .checkers
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(t);
        }
        crate::matching::add_publisher(&self.inner.ctx.graph, inner.clone(), (ty.name, ty.hash))?;
        let owner: Weak<dyn PubOwner> = Arc::downgrade(&(inner.clone() as Arc<dyn PubOwner>));
        for l in inner.links.iter() {
            l.start(owner.clone());
        }
        if let (LivelinessKind::Automatic, Some(lease), false) = (
            qos.liveliness.kind,
            qos.liveliness.lease,
            inner.links.is_empty(),
        ) {
            // Asserted by the process for the subscriptions elsewhere
            // (`publisher::automatic`); in this process it is alive while
            // it exists.
            let w: Weak<dyn crate::publisher::automatic::AssertsAutomatically> =
                Arc::downgrade(&(inner.clone() as _));
            crate::publisher::automatic::register(w, lease);
        }
        Ok(Publisher { inner })
    }

    /// Create a subscription whose callback the node's executor runs. The
    /// callback takes `T`, `Box<T>`, `Arc<T>`, `&T` or
    /// [`Received<T>`](crate::Received); its signature picks the buffer kind
    /// (see [`BufferKind::CallbackDefault`]).
    pub fn create_subscription<T: Message, M>(
        &self,
        topic: &str,
        qos: QoS,
        callback: impl SubscriptionCallback<T, M>,
    ) -> Result<Subscription<T>, CreateEndpointError> {
        self.create_subscription_with(topic, qos, SubscriptionOptions::default(), callback)
    }

    /// [`create_subscription`](Self::create_subscription) with options (the
    /// buffer kind).
    pub fn create_subscription_with<T: Message, M, C: SubscriptionCallback<T, M>>(
        &self,
        topic: &str,
        qos: QoS,
        options: SubscriptionOptions,
        callback: C,
    ) -> Result<Subscription<T>, CreateEndpointError> {
        let s = self.subscription_as(topic, qos, options, callback, TypeInfo::of::<T>())?;
        self.uses_type::<T>();
        Ok(s)
    }

    /// A callback subscription that shows transports the type `ty`.
    fn subscription_as<T: Message, M, C: SubscriptionCallback<T, M>>(
        &self,
        topic: &str,
        qos: QoS,
        options: SubscriptionOptions,
        callback: C,
        ty: TypeInfo,
    ) -> Result<Subscription<T>, CreateEndpointError> {
        let delivery = callback_delivery(options.buffer, C::WANTS_OWNERSHIP);
        self.make_subscription(
            topic,
            qos,
            delivery,
            Some(callback.into_dispatch()),
            &options,
            ty,
        )
    }

    /// A subscription to the message type `ty` names (known at run time:
    /// a Python node, a bridge) that receives each message as its wire
    /// bytes ([`AnyMessage`](crate::AnyMessage): CDR for a ROS type). It
    /// announces `ty` and matches only publishers of that type: typed
    /// publishers in other processes and hosts, raw publishers
    /// ([`create_raw_publisher`](Self::create_raw_publisher)) of `ty` in
    /// this context. A typed endpoint of the topic in this context is a
    /// [`CreateEndpointError::TypeMismatch`], as is a raw one of another
    /// type.
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// use myelin_core::{AnyMessage, Context, Executor, QoS, RawType, SubscriptionOptions};
    ///
    /// let ctx = Context::builder().shared_memory(false).network(false).build().unwrap();
    /// let node = ctx.create_node("bridge").unwrap();
    /// let ty = RawType::ros(
    ///     "std_msgs/msg/String",
    ///     "RIHS01_df668c740482bbd48fb39d76a70dfd4bd59db1288021743503259e948f6b1a18",
    /// )
    /// .unwrap();
    /// let got = Arc::new(Mutex::new(Vec::new()));
    /// let g = got.clone();
    /// let _s = node
    ///     .create_raw_subscription("chatter", &ty, QoS::keep_last(10), SubscriptionOptions::default(),
    ///         move |m: AnyMessage| g.lock().unwrap().push(m.bytes().to_vec()))
    ///     .unwrap();
    /// let p = node.create_raw_publisher("chatter", &ty, QoS::keep_last(10)).unwrap();
    /// let cdr: &[u8] = &[0, 1, 0, 0, 3, 0, 0, 0, b'h', b'i', 0];
    /// p.publish(AnyMessage(cdr.into())).unwrap();
    /// let mut exec = Executor::new();
    /// exec.add_node(&node).unwrap();
    /// exec.spin_some().unwrap();
    /// assert_eq!(got.lock().unwrap()[0], cdr);
    /// // Another type on the same topic is refused.
    /// let other = RawType::of::<u32>();
    /// assert!(node.create_raw_publisher("chatter", &other, QoS::keep_last(1)).is_err());
    /// ```
    pub fn create_raw_subscription<M, C: SubscriptionCallback<crate::AnyMessage, M>>(
        &self,
        topic: &str,
        ty: &crate::RawType,
        qos: QoS,
        options: SubscriptionOptions,
        callback: C,
    ) -> Result<Subscription<crate::AnyMessage>, CreateEndpointError> {
        self.subscription_as(topic, qos, options, callback, TypeInfo::of_raw(ty))
    }

    /// Create a subscription without a callback, read with
    /// [`Subscription::take`] or [`Subscription::wait_for_message`]. It is not
    /// run by an executor. Its buffer is `Shared` unless `options` say
    /// otherwise (a blocked waiter gets the publisher's `Arc`, no copy).
    pub fn create_polling_subscription<T: Message>(
        &self,
        topic: &str,
        qos: QoS,
        options: SubscriptionOptions,
    ) -> Result<Subscription<T>, CreateEndpointError> {
        self.polling_subscription_as(topic, qos, options, TypeInfo::of::<T>())
            .inspect(|_| self.uses_type::<T>())
    }

    /// A polling subscription that shows transports the type `ty`.
    fn polling_subscription_as<T: Message>(
        &self,
        topic: &str,
        qos: QoS,
        options: SubscriptionOptions,
        ty: TypeInfo,
    ) -> Result<Subscription<T>, CreateEndpointError> {
        let delivery = match options.buffer {
            BufferKind::CallbackDefault | BufferKind::Shared => Delivery::Shared,
            BufferKind::Owned => Delivery::Owned,
            BufferKind::Value => Delivery::Value,
        };
        self.make_subscription(
            topic,
            qos,
            delivery,
            None,
            &SubscriptionOptions {
                inline: false,
                ..options
            },
            ty,
        )
    }

    /// The executor-run queue for an endpoint's event callback, if it has one.
    fn event_queue<E: Send + 'static>(
        &self,
        callback: &Option<crate::SharedEventCallback<E>>,
        group: &Arc<GroupInner>,
        what: &str,
        topic: &str,
    ) -> Option<Arc<EventQueue<E>>> {
        callback.as_ref().map(|cb| {
            let cb = cb.clone();
            let q = EventQueue::new(
                Box::new(move |e| cb(e)),
                group.clone(),
                format!("{what} {topic:?} of node {:?}", self.inner.fqn),
            );
            self.inner.adopt(q.clone());
            q
        })
    }

    /// A checker timer for deadline or liveliness, in the endpoint's group.
    fn checker(
        &self,
        topic: &str,
        period: Duration,
        policy: QosPolicy,
        group: &Arc<GroupInner>,
        f: impl FnMut() + Send + 'static,
    ) -> Result<Timer, CreateEndpointError> {
        let group = CallbackGroup {
            inner: group.clone(),
        };
        // Deadlines are periods of the data's time (ROS time: simulated
        // under use_sim_time, so a replay at any rate keeps its deadlines);
        // liveliness leases are about the process and stay on steady time.
        let ros_time = policy == QosPolicy::Deadline;
        self.make_timer(period, &group, ros_time, without_info(f))
            .map_err(|e| match e {
                CreateTimerError::ZeroPeriod => CreateEndpointError::InvalidQos {
                    topic: topic.to_string(),
                    policy,
                    reason: "a zero period would never be met",
                },
                // `QoS::validate` refused these before: kept for the match.
                CreateTimerError::PeriodTooLong(_) => CreateEndpointError::InvalidQos {
                    topic: topic.to_string(),
                    policy,
                    reason: "the period is beyond ROS 2's infinite (about 292 years)",
                },
                CreateTimerError::ContextShutDown => {
                    CreateEndpointError::ContextShutDown(topic.to_string())
                }
            })
    }

    fn make_subscription<T: Message>(
        &self,
        topic: &str,
        qos: QoS,
        delivery: Delivery,
        callback: Option<crate::subscription::Dispatch<T>>,
        options: &SubscriptionOptions,
        ty: TypeInfo,
    ) -> Result<Subscription<T>, CreateEndpointError> {
        let inline = options.inline;
        let group = options
            .callback_group
            .as_ref()
            .unwrap_or(&self.inner.default_group)
            .inner
            .clone();
        let topic = self.resolve_topic_name(topic)?;
        self.check_ctx(&topic)?;
        Self::check_qos(&topic, &qos)?;
        let id = self.inner.ctx.new_id();
        if let Some(n) = options.max_publishers
            && !(1..=crate::subscription::MAX_PUBLISHERS).contains(&n)
        {
            return Err(CreateEndpointError::InvalidOption {
                topic,
                option: "max_publishers",
                reason: format!("{n}: must be 1 to {}", crate::subscription::MAX_PUBLISHERS),
            });
        }
        let (serial, gid) = self.new_gid();
        let mut spec = self.spec(id, (serial, gid), &topic, &qos, ty);
        spec.max_publishers = options.max_publishers;
        let links = self.links::<dyn SubLink>(&spec, |t, spec| t.subscription(spec))?;
        let events = self.event_queue(&options.event_callback, &group, "subscription", &topic);
        let inner = Arc::new(SubInner::new(SubSpec {
            id,
            gid,
            topic: topic.clone(),
            qos,
            delivery,
            node: self.inner.clone(),
            callback,
            inline,
            group: group.clone(),
            events,
            links,
        }));
        inner.reserve();
        // The handle from here on: an error below drops it, which closes the
        // subscription (leaves the executor, gives the reserved reference
        // back) as for any dropped subscription.
        let sub = Subscription { inner };
        let inner = &sub.inner;
        if !inner.has_callback() {
            // Only polling subscriptions have waiters to wake at shutdown.
            self.inner.ctx.graph.register_waiter(inner.waitpoint());
        }
        if inner.has_callback() && !inline {
            // Attach before the graph can deliver, so nothing is pushed
            // without waking the executor; history replay then wakes it.
            self.inner.adopt(inner.clone());
        }
        if inline {
            // Messages from other processes that wait to be pumped (shared
            // memory) are pumped, and run the callback, on the process's
            // inline pump thread.
            inner.start_inline_pump();
        }
        let mut checkers = Vec::new();
        if let Some(d) = qos.deadline {
            let w = Arc::downgrade(inner);
            let mut last = 0;
            checkers.push(
                self.checker(&topic, d, QosPolicy::Deadline, &group, move || {
                    if let Some(s) = w.upgrade() {
                        s.check_deadline(&mut last);
                    }
                })?,
            );
        }
        if let Some(lease) = qos.liveliness.lease {
            let w = Arc::downgrade(inner);
            let period = (lease / 4).max(Duration::from_millis(1));
            checkers.push(self.checker(
                &topic,
                period,
                QosPolicy::Liveliness,
                &group,
                move || {
                    if let Some(s) = w.upgrade() {
                        s.update_liveliness(None);
                        s.refresh_remote_liveliness();
                    }
                },
            )?);
        }
        *inner.checkers.lock().unwrap_or_else(|e| e.into_inner()) = checkers;
        crate::matching::add_subscription(
            &self.inner.ctx.graph,
            inner.clone(),
            (ty.name, ty.hash),
        )?;
        let owner: Weak<dyn SubOwner> = Arc::downgrade(&(inner.clone() as Arc<dyn SubOwner>));
        for l in inner.links.iter() {
            l.start(owner.clone())
                .map_err(|e| CreateEndpointError::Transport {
                    topic: topic.clone(),
                    why: e.to_string(),
                })?;
        }
        Ok(sub)
    }

    /// A new publisher's or subscription's process-unique number and the
    /// gid made of it.
    fn new_gid(&self) -> (u64, crate::Gid) {
        let serial = crate::gid::next_serial();
        let shm = self.inner.ctx.transports.get("shm").is_some();
        (serial, crate::gid::own(self.inner.ctx.pid, serial, shm))
    }

    /// What the transports see of a new endpoint.
    fn spec<'a>(
        &'a self,
        id: u64,
        (serial, gid): (u64, crate::Gid),
        topic: &'a str,
        qos: &'a QoS,
        ty: TypeInfo,
    ) -> EndpointSpec<'a> {
        EndpointSpec {
            id,
            serial,
            gid,
            topic,
            qos,
            ty,
            max_publishers: None,
            node: NodeIdent {
                fqn: &self.inner.fqn,
                name: &self.inner.name,
                namespace: &self.inner.namespace,
                nid: self.inner.nid,
            },
        }
    }

    /// One link per transport of the context for a new endpoint (`make`
    /// asks a transport for it): an error when another process has the
    /// topic with another type, or when a transport fails.
    fn links<L: ?Sized>(
        &self,
        spec: &EndpointSpec<'_>,
        make: impl Fn(&dyn Transport, &EndpointSpec<'_>) -> Result<Option<Arc<L>>, TransportError>,
    ) -> Result<Vec<Arc<L>>, CreateEndpointError> {
        let (topic, ty) = (spec.topic, spec.ty);
        let transports = &self.inner.ctx.transports;
        if !ty.crosses() && !ty.any && !transports.is_empty() {
            warn_local_type(ty.name, topic);
        }
        for t in transports.iter() {
            t.check_type(spec)?;
        }
        let mut links = Vec::new();
        for t in transports.iter() {
            match make(&**t, spec) {
                Ok(l) => links.extend(l),
                Err(e) => {
                    return Err(CreateEndpointError::Transport {
                        topic: topic.to_string(),
                        why: format!("{}: {e}", t.name()),
                    });
                }
            }
        }
        Ok(links)
    }

    /// Resolve a service name and check the context is alive.
    fn service_name(&self, name: &str) -> Result<String, CreateServiceError> {
        let n = &self.inner;
        let expanded = names::expand_topic_name(name, &n.name, &n.namespace, NameKind::Service)?;
        let name = n.ctx.remaps.name(
            expanded,
            &n.created_as,
            &n.name,
            &n.namespace,
            NameKind::Service,
        );
        if self.inner.ctx.is_shut_down() {
            return Err(CreateServiceError::ContextShutDown(name));
        }
        Ok(name)
    }

    /// Create a service server; its callback (run by the node's executor)
    /// turns each request into a response. See [`crate::service`].
    pub fn create_service<Req: Message, Resp: Message>(
        &self,
        name: &str,
        callback: impl FnMut(Req) -> Resp + Send + 'static,
    ) -> Result<Service<Req, Resp>, CreateServiceError> {
        self.create_service_with(name, ServiceOptions::default(), callback)
    }

    /// [`create_service`](Self::create_service) with options (callback
    /// group, inline).
    pub fn create_service_with<Req: Message, Resp: Message>(
        &self,
        name: &str,
        options: ServiceOptions,
        callback: impl FnMut(Req) -> Resp + Send + 'static,
    ) -> Result<Service<Req, Resp>, CreateServiceError> {
        self.make_service(
            name,
            options,
            Handler::Now(Box::new(callback)),
            None,
            None,
            None,
        )
    }

    /// A server that answers later: its callback gets each request with
    /// its [`ServiceReply`](crate::ServiceReply), which it keeps (in a
    /// queue, another thread, a timer) and [`send`](crate::ServiceReply::send)s
    /// when the answer is ready, as rclcpp's services with a request
    /// header do. The executor is free meanwhile; an action server's
    /// `get_result` waits for its goal this way.
    ///
    /// ```
    /// use myelin_core::{Context, Executor};
    /// use std::time::Duration;
    ///
    /// let ctx = Context::builder().handle_signals(false).build()?;
    /// let node = ctx.create_node("later")?;
    /// let _srv = node.create_deferred_service::<i64, i64>("slow_double", |x, reply| {
    ///     std::thread::spawn(move || reply.send(2 * x));
    /// })?;
    /// let client = node.create_client::<i64, i64>("slow_double")?;
    /// let mut exec = Executor::new();
    /// exec.add_node(&node)?;
    /// let stop = exec.stop_handle();
    /// let spinner = std::thread::spawn(move || exec.spin());
    /// assert_eq!(client.call(21, Duration::from_secs(5))?, 42);
    /// stop.stop();
    /// spinner.join().unwrap()?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn create_deferred_service<Req: Message, Resp: Message>(
        &self,
        name: &str,
        callback: impl FnMut(Req, crate::ServiceReply<Resp>) + Send + 'static,
    ) -> Result<Service<Req, Resp>, CreateServiceError> {
        self.make_service(
            name,
            ServiceOptions::default(),
            Handler::Later(Box::new(callback)),
            None,
            None,
            None,
        )
    }

    /// [`create_deferred_service`](Self::create_deferred_service) for the
    /// service type `S`, reachable by ROS 2 clients on rmw_zenoh as with
    /// [`create_service_for`](Self::create_service_for).
    pub fn create_deferred_service_for<S: crate::ServiceType>(
        &self,
        name: &str,
        options: ServiceOptions,
        callback: impl FnMut(S::Request, crate::ServiceReply<S::Response>) + Send + 'static,
    ) -> Result<Service<S::Request, S::Response>, CreateServiceError> {
        self.make_service(
            name,
            options,
            Handler::Later(Box::new(callback)),
            Some(remote_services::service_type_info::<S>()),
            None,
            Some(ServiceTypeRef::of::<S>(self.event_sinks())),
        )
        .inspect(|_| self.uses_service_type::<S>())
    }

    /// Create a server for the service type `S` (a `.srv`: see
    /// [`ServiceType`](crate::ServiceType)), as rclcpp's
    /// `create_service<AddTwoInts>`: besides what
    /// [`create_service`](Self::create_service) does, it answers ROS 2
    /// clients on rmw_zenoh (a zenoh queryable on the service type's key
    /// expression, and its `SS` liveliness token) when the context is on
    /// the network.
    ///
    /// ```
    /// use myelin_core::{Context, Executor, ServiceType};
    /// use std::time::Duration;
    ///
    /// struct Double;
    /// impl ServiceType for Double {
    ///     type Request = i64;
    ///     type Response = i64;
    ///     const TYPE_NAME: &'static str = "my_pkg/srv/Double";
    /// }
    ///
    /// let ctx = Context::builder().handle_signals(false).build()?;
    /// let node = ctx.create_node("doubler")?;
    /// let _srv = node.create_service_for::<Double>("double", |x| 2 * x)?;
    /// let client = node.create_client_for::<Double>("double")?;
    /// let mut exec = Executor::new();
    /// exec.add_node(&node)?;
    /// let stop = exec.stop_handle();
    /// let spinner = std::thread::spawn(move || exec.spin());
    /// assert_eq!(client.call(21, Duration::from_secs(5))?, 42);
    /// stop.stop();
    /// spinner.join().unwrap()?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn create_service_for<S: crate::ServiceType>(
        &self,
        name: &str,
        callback: impl FnMut(S::Request) -> S::Response + Send + 'static,
    ) -> Result<Service<S::Request, S::Response>, CreateServiceError> {
        self.create_service_for_with::<S>(name, ServiceOptions::default(), callback)
    }

    /// [`create_service_for`](Self::create_service_for) with options.
    pub fn create_service_for_with<S: crate::ServiceType>(
        &self,
        name: &str,
        options: ServiceOptions,
        callback: impl FnMut(S::Request) -> S::Response + Send + 'static,
    ) -> Result<Service<S::Request, S::Response>, CreateServiceError> {
        self.make_service(
            name,
            options,
            Handler::Now(Box::new(callback)),
            Some(remote_services::service_type_info::<S>()),
            None,
            Some(ServiceTypeRef::of::<S>(self.event_sinks())),
        )
        .inspect(|_| self.uses_service_type::<S>())
    }

    /// A server; `net`: the service type, to serve through the transports'
    /// own service mechanism too.
    fn make_service<Req: Message, Resp: Message>(
        &self,
        name: &str,
        options: ServiceOptions,
        callback: Handler<Req, Resp>,
        net: Option<TypeInfo>,
        raw_hashes: Option<(crate::TypeHash, crate::TypeHash)>,
        intro: Option<ServiceTypeRef>,
    ) -> Result<Service<Req, Resp>, CreateServiceError> {
        let name = self.service_name(name)?;
        let group = options
            .callback_group
            .as_ref()
            .unwrap_or(&self.inner.default_group)
            .inner
            .clone();
        let id = self.inner.ctx.new_id();
        let inner = Arc::new(ServiceInner::new(
            id,
            name,
            self.inner.clone(),
            callback,
            &options,
            group,
            intro,
        ));
        if !options.inline {
            self.inner.adopt(inner.clone());
        }
        crate::service::add_server(&self.inner.ctx.graph, inner.clone())?;
        let remote = if self.inner.ctx.crosses_processes()
            && remote_services::transportable::<Req, Resp>()
        {
            Some(
                remote_services::ServerRemote::new(
                    self,
                    &inner.name,
                    Arc::downgrade(&inner),
                    options.callback_group.as_ref(),
                    raw_hashes,
                )
                .map_err(|e| CreateServiceError::Transport(e.to_string()))?,
            )
        } else {
            None
        };
        let mut guards: Vec<Box<dyn std::any::Any + Send + Sync>> = Vec::new();
        if let Some(r) = remote {
            guards.push(Box::new(r));
        }
        if let Some(ty) = net.filter(|_| remote_services::transportable::<Req, Resp>()) {
            let spec = self.service_spec(id, &inner.name, ty);
            for t in self.inner.ctx.transports.iter() {
                let handler = remote_services::request_handler(Arc::downgrade(&inner));
                if let Some(g) = t
                    .service_server(&spec, handler)
                    .map_err(|e| CreateServiceError::Transport(e.to_string()))?
                {
                    guards.push(g);
                }
            }
        }
        Ok(Service {
            inner,
            _remote: (!guards.is_empty())
                .then(|| Box::new(guards) as Box<dyn std::any::Any + Send + Sync>),
        })
    }

    /// How a service or client of this node makes its introspection event
    /// publisher (a raw publisher of the node, stamped with its clock).
    fn event_sinks(&self) -> MakeSink {
        let node = Arc::downgrade(&self.inner);
        Arc::new(move |topic: &str, event_type: &str, hash: &str, qos: QoS| {
            let gone = || CreateEndpointError::ContextShutDown(topic.to_string());
            // A handle of myelin's own (the program's handles keep the
            // node's parameter services alive, not this one).
            let node = Node {
                inner: node.upgrade().ok_or_else(gone)?,
                _user: None,
            };
            let ty = crate::RawType::ros(event_type, hash).map_err(|e| {
                CreateEndpointError::Transport {
                    topic: topic.to_string(),
                    why: e.to_string(),
                }
            })?;
            let publisher = node.create_raw_publisher(topic, &ty, qos)?;
            let clock = node.get_clock();
            Ok(EventSink {
                topic: publisher.topic().to_string(),
                publish: Box::new(move |bytes: Vec<u8>| {
                    publisher
                        .publish(crate::AnyMessage(bytes.into()))
                        .map_err(|e| e.to_string())
                }),
                now: Box::new(move || {
                    let t = clock.now();
                    (t.sec, t.nanosec)
                }),
            })
        })
    }

    /// What the transports see of a service of type `ty`.
    fn service_spec<'a>(&'a self, id: u64, name: &'a str, ty: TypeInfo) -> EndpointSpec<'a> {
        EndpointSpec {
            id,
            serial: crate::gid::next_serial(),
            gid: crate::Gid::default(),
            topic: name,
            qos: &remote_services::SERVICE_QOS,
            ty,
            max_publishers: None,
            node: NodeIdent {
                fqn: &self.inner.fqn,
                name: &self.inner.name,
                namespace: &self.inner.namespace,
                nid: self.inner.nid,
            },
        }
    }

    /// Create a service client.
    pub fn create_client<Req: Message, Resp: Message>(
        &self,
        name: &str,
    ) -> Result<Client<Req, Resp>, CreateServiceError> {
        self.make_client(name, None, None, None)
    }

    /// A client of the service type `S` (see
    /// [`create_service_for`](Self::create_service_for)): besides servers
    /// in this process and other myelin processes, it reaches ROS 2
    /// servers on rmw_zenoh when the context is on the network (a zenoh
    /// `get` on the service type's key expression).
    pub fn create_client_for<S: crate::ServiceType>(
        &self,
        name: &str,
    ) -> Result<Client<S::Request, S::Response>, CreateServiceError> {
        self.make_client(
            name,
            Some(remote_services::service_type_info::<S>()),
            None,
            Some(ServiceTypeRef::of::<S>(self.event_sinks())),
        )
        .inspect(|_| self.uses_service_type::<S>())
    }

    /// A server of the service type `ty` (known at run time: a Python
    /// node's) that takes and answers CDR bytes. It is reached as a server
    /// of the Rust service type `ty` names would be: from clients in this
    /// context of the same raw type, from myelin clients in other
    /// processes, and from ROS 2 clients on rmw_zenoh.
    ///
    /// ```
    /// use myelin_core::{AnyMessage, Context, RawServiceType, RawType, ServiceOptions};
    /// # use std::time::Duration;
    ///
    /// let ctx = Context::builder().shared_memory(false).network(false).build().unwrap();
    /// let node = ctx.create_node("echo").unwrap();
    /// let h = |s: &str| format!("RIHS01_{}", s.repeat(64));
    /// let ty = RawServiceType::ros(
    ///     "my_pkg/srv/Echo",
    ///     &h("1"),
    ///     RawType::ros("my_pkg/srv/Echo_Request", &h("2")).unwrap(),
    ///     RawType::ros("my_pkg/srv/Echo_Response", &h("3")).unwrap(),
    /// )
    /// .unwrap();
    /// let _server = node
    ///     .create_raw_service("echo", &ty, ServiceOptions::inline(), |req: AnyMessage| req)
    ///     .unwrap();
    /// let client = node.create_raw_client("echo", &ty).unwrap();
    /// let cdr: &[u8] = &[0, 1, 0, 0, 7, 0, 0, 0];
    /// let reply = client.call(AnyMessage(cdr.into()), Duration::from_secs(5)).unwrap();
    /// assert_eq!(reply.bytes(), cdr);
    /// ```
    pub fn create_raw_service(
        &self,
        name: &str,
        ty: &crate::RawServiceType,
        options: ServiceOptions,
        callback: impl FnMut(crate::AnyMessage) -> crate::AnyMessage + Send + 'static,
    ) -> Result<Service<crate::AnyMessage, crate::AnyMessage>, CreateServiceError> {
        self.make_service(
            name,
            options,
            Handler::Now(Box::new(callback)),
            Some(remote_services::raw_service_type_info(ty)),
            Some((ty.request().hash(), ty.response().hash())),
            Some(ServiceTypeRef::raw(ty, self.event_sinks())),
        )
    }

    /// [`create_raw_service`](Self::create_raw_service) answering later:
    /// the callback gets a [`ServiceReply`](crate::ServiceReply) to
    /// [`send`](crate::ServiceReply::send) the response with when it is
    /// ready (from any thread), as
    /// [`create_deferred_service`](Self::create_deferred_service) does for
    /// Rust types. For run-time typed servers that wait on something
    /// before answering (a Python action server's results).
    ///
    /// ```
    /// use myelin_core::{AnyMessage, Context, RawServiceType, RawType, ServiceOptions};
    /// # use std::time::Duration;
    ///
    /// let ctx = Context::builder().shared_memory(false).network(false).build().unwrap();
    /// let node = ctx.create_node("later").unwrap();
    /// let h = |s: &str| format!("RIHS01_{}", s.repeat(64));
    /// let ty = RawServiceType::ros(
    ///     "my_pkg/srv/Echo",
    ///     &h("1"),
    ///     RawType::ros("my_pkg/srv/Echo_Request", &h("2")).unwrap(),
    ///     RawType::ros("my_pkg/srv/Echo_Response", &h("3")).unwrap(),
    /// )
    /// .unwrap();
    /// let _server = node
    ///     .create_raw_deferred_service("echo", &ty, ServiceOptions::inline(), |req: AnyMessage, reply| {
    ///         std::thread::spawn(move || reply.send(req));
    ///     })
    ///     .unwrap();
    /// let client = node.create_raw_client("echo", &ty).unwrap();
    /// let cdr: &[u8] = &[0, 1, 0, 0, 7, 0, 0, 0];
    /// let answer = client.call(AnyMessage(cdr.into()), Duration::from_secs(5)).unwrap();
    /// assert_eq!(answer.bytes(), cdr);
    /// ```
    pub fn create_raw_deferred_service(
        &self,
        name: &str,
        ty: &crate::RawServiceType,
        options: ServiceOptions,
        callback: impl FnMut(crate::AnyMessage, crate::ServiceReply<crate::AnyMessage>) + Send + 'static,
    ) -> Result<Service<crate::AnyMessage, crate::AnyMessage>, CreateServiceError> {
        self.make_service(
            name,
            options,
            Handler::Later(Box::new(callback)),
            Some(remote_services::raw_service_type_info(ty)),
            Some((ty.request().hash(), ty.response().hash())),
            Some(ServiceTypeRef::raw(ty, self.event_sinks())),
        )
    }

    /// A client of the service type `ty` (known at run time), calling
    /// with CDR bytes: see [`create_raw_service`](Self::create_raw_service).
    pub fn create_raw_client(
        &self,
        name: &str,
        ty: &crate::RawServiceType,
    ) -> Result<Client<crate::AnyMessage, crate::AnyMessage>, CreateServiceError> {
        self.make_client(
            name,
            Some(remote_services::raw_service_type_info(ty)),
            Some((ty.request().hash(), ty.response().hash())),
            Some(ServiceTypeRef::raw(ty, self.event_sinks())),
        )
    }

    /// A client; `net`: the service type, to call through the transports'
    /// own service mechanism too (after myelin's, which it prefers).
    fn make_client<Req: Message, Resp: Message>(
        &self,
        name: &str,
        net: Option<TypeInfo>,
        raw_hashes: Option<(crate::TypeHash, crate::TypeHash)>,
        intro: Option<ServiceTypeRef>,
    ) -> Result<Client<Req, Resp>, CreateServiceError> {
        let name = self.service_name(name)?;
        crate::service::check_type::<Req, Resp>(&self.inner.ctx.graph, &name)?;
        let id = self.inner.ctx.new_id();
        // A gid as every myelin endpoint's (host, process, number): what
        // its requests carry, unique across the hosts a ROS 2 server
        // hears from.
        let gid = crate::gid::own(std::process::id(), crate::gid::next_serial(), false);
        let mut c = ClientInner::new(id, name, self.inner.clone(), gid.0, intro);
        let mut ways: Vec<Box<dyn crate::service::RemoteCalls<Req, Resp>>> = Vec::new();
        if self.inner.ctx.crosses_processes() && remote_services::transportable::<Req, Resp>() {
            ways.push(Box::new(
                remote_services::ClientRemote::new(self, &c.name, raw_hashes)
                    .map_err(|e| CreateServiceError::Transport(e.to_string()))?,
            ));
            if let Some(ty) = net {
                let spec = self.service_spec(id, &c.name, ty);
                for t in self.inner.ctx.transports.iter() {
                    if let Some(raw) = t
                        .service_client(&spec)
                        .map_err(|e| CreateServiceError::Transport(e.to_string()))?
                    {
                        ways.push(Box::new(remote_services::NetCalls {
                            raw,
                            _types: std::marker::PhantomData,
                        }));
                    }
                }
            }
        }
        c.remote = match ways.len() {
            0 => None,
            1 => ways.pop(),
            _ => Some(Box::new(remote_services::FirstReady(ways))),
        };
        let inner = Arc::new(c);
        crate::service::add_client(&self.inner.ctx.graph, inner.clone())?;
        Ok(Client { inner })
    }

    /// The services known in this node's context with their types.
    pub fn service_names_and_types(&self) -> Vec<(String, String)> {
        self.inner.ctx.graph.service_names_and_types()
    }

    /// A new callback group on this node (see [`CallbackGroup`]).
    pub fn create_callback_group(&self, kind: CallbackGroupKind) -> CallbackGroup {
        CallbackGroup::new(kind)
    }

    /// The node's default callback group (mutually exclusive).
    pub fn default_callback_group(&self) -> CallbackGroup {
        self.inner.default_group.clone()
    }

    /// Create a periodic timer on ROS time, run by this node's executor.
    /// ROS time is steady time unless the context uses simulated time
    /// ([`use_sim_time`](crate::ContextBuilder::use_sim_time)): then the
    /// timer follows `/clock` (see [`time`](crate::time) for jumps). See
    /// the [executor docs](crate::executor) for what happens on overrun.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let ctx = myelin_core::Context::builder().handle_signals(false).build()?;
    /// let node = ctx.create_node("ticker")?;
    /// let timer = node.create_timer(Duration::from_millis(10), || println!("tick"))?;
    /// assert_eq!(timer.period(), Duration::from_millis(10));
    /// # Ok(()) }
    /// ```
    pub fn create_timer(
        &self,
        period: Duration,
        callback: impl FnMut() + Send + 'static,
    ) -> Result<Timer, CreateTimerError> {
        let group = self.inner.default_group.clone();
        self.make_timer(period, &group, true, without_info(callback))
    }

    /// [`create_timer`](Self::create_timer) in a given callback group.
    pub fn create_timer_in(
        &self,
        period: Duration,
        group: &CallbackGroup,
        callback: impl FnMut() + Send + 'static,
    ) -> Result<Timer, CreateTimerError> {
        self.make_timer(period, group, true, without_info(callback))
    }

    /// [`create_timer`](Self::create_timer) whose callback is told when its
    /// tick was due and when it started ([`TimerInfo`], rclcpp's
    /// `TimerInfo` callback): a control loop's lateness, per tick.
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// use std::time::Duration;
    /// use myelin_core::{Context, Executor, TimerInfo};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let ctx = Context::builder().handle_signals(false).build()?;
    /// let node = ctx.create_node("controller")?;
    /// let late = Arc::new(Mutex::new(Vec::new()));
    /// let l = late.clone();
    /// let _t = node.create_timer_with_info(Duration::from_millis(1), move |info: &TimerInfo| {
    ///     l.lock().unwrap().push(info.lateness());
    /// })?;
    /// let mut exec = Executor::new();
    /// exec.add_node(&node)?;
    /// exec.spin_until(Duration::from_secs(10), || late.lock().unwrap().len() >= 3)?;
    /// # Ok(()) }
    /// ```
    pub fn create_timer_with_info(
        &self,
        period: Duration,
        callback: impl FnMut(&TimerInfo) + Send + 'static,
    ) -> Result<Timer, CreateTimerError> {
        let group = self.inner.default_group.clone();
        self.make_timer(period, &group, true, Box::new(callback))
    }

    /// [`create_timer_with_info`](Self::create_timer_with_info) in a given
    /// callback group.
    pub fn create_timer_with_info_in(
        &self,
        period: Duration,
        group: &CallbackGroup,
        callback: impl FnMut(&TimerInfo) + Send + 'static,
    ) -> Result<Timer, CreateTimerError> {
        self.make_timer(period, group, true, Box::new(callback))
    }

    /// A periodic timer on steady time, whatever `/clock` says (rclcpp's
    /// `create_wall_timer`): for work paced by the real world (polling a
    /// device, a watchdog) in a node that otherwise follows simulated time.
    pub fn create_wall_timer(
        &self,
        period: Duration,
        callback: impl FnMut() + Send + 'static,
    ) -> Result<Timer, CreateTimerError> {
        let group = self.inner.default_group.clone();
        self.make_timer(period, &group, false, without_info(callback))
    }

    /// [`create_wall_timer`](Self::create_wall_timer) in a given callback
    /// group.
    pub fn create_wall_timer_in(
        &self,
        period: Duration,
        group: &CallbackGroup,
        callback: impl FnMut() + Send + 'static,
    ) -> Result<Timer, CreateTimerError> {
        self.make_timer(period, group, false, without_info(callback))
    }

    fn make_timer(
        &self,
        period: Duration,
        group: &CallbackGroup,
        ros_time: bool,
        callback: crate::timer::TimerCallback,
    ) -> Result<Timer, CreateTimerError> {
        if period.is_zero() {
            return Err(CreateTimerError::ZeroPeriod);
        }
        if period.as_nanos() > i64::MAX as u128 {
            return Err(CreateTimerError::PeriodTooLong(period));
        }
        if self.inner.ctx.is_shut_down() {
            return Err(CreateTimerError::ContextShutDown);
        }
        let id = self.inner.ctx.new_id();
        let inner = Arc::new(TimerInner::new(
            id,
            period,
            ros_time,
            callback,
            self.inner.clone(),
            group.inner.clone(),
        ));
        self.inner.adopt_timer(inner.clone());
        Ok(Timer { inner })
    }

    /// This node's ROS clock ([`Clock::now`](crate::time::Clock::now)
    /// follows `/clock` when the context uses simulated time).
    pub fn get_clock(&self) -> crate::time::Clock {
        crate::time::Clock::ros(self.inner.ctx.sim.clone())
    }

    /// ROS time now: the system clock, or the last `/clock` under
    /// simulated time (zero before the first). Stamp messages with it.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let ctx = myelin_core::Context::builder().handle_signals(false).build()?;
    /// let node = ctx.create_node("stamper")?;
    /// let stamp = node.now();
    /// assert!(stamp.sec > 1_600_000_000); // the wall clock: after 2020
    /// # Ok(()) }
    /// ```
    pub fn now(&self) -> crate::time::Time {
        self.get_clock().now()
    }

    /// The topics of the graph with their types, as rclcpp's
    /// `get_topic_names_and_types`: this context's and those of other
    /// processes and hosts its transports see (shared memory: this host;
    /// zenoh: the whole domain). Sorted by name; a topic carried with two
    /// types (across processes, which cannot talk) lists both. myelin's
    /// internal service topics (`/_srv/...`) and the "any type" of tools
    /// that take whatever a topic carries are left out.
    ///
    /// The first graph query of a context on zenoh starts following the
    /// domain's graph and asks the network for it (up to 2 s, milliseconds
    /// with a router); later ones read what it follows.
    ///
    /// ```
    /// # use myelin_core::{Context, QoS};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let ctx = Context::builder().handle_signals(false).build()?;
    /// let node = ctx.create_node("lister")?;
    /// let _p = node.create_publisher::<u32>("/answer", QoS::keep_last(1))?;
    /// let topics = node.topic_names_and_types();
    /// let answer = topics.iter().find(|(name, _)| name == "/answer").unwrap();
    /// assert_eq!(answer.1, vec![<u32 as myelin_core::Message>::TYPE_NAME.to_string()]);
    /// # Ok(()) }
    /// ```
    pub fn topic_names_and_types(&self) -> Vec<(String, Vec<String>)> {
        let mut map: std::collections::BTreeMap<String, Vec<String>> = Default::default();
        let local = self.inner.ctx.graph.topic_names_and_types();
        let remote = self.inner.ctx.graph_endpoints();
        let all = local
            .into_iter()
            .map(|(t, ty)| (t, ty.to_string()))
            .chain(remote.into_iter().map(|e| (e.topic, e.type_name)));
        for (topic, ty) in all {
            if topic.starts_with("/_srv/") {
                continue;
            }
            let types = map.entry(topic).or_default();
            if ty != crate::transport::ANY_TYPE_NAME && !types.contains(&ty) {
                types.push(ty);
            }
        }
        map.into_iter()
            .map(|(t, mut types)| {
                types.sort();
                (t, types)
            })
            .collect()
    }

    /// The fully qualified names of the graph's nodes, sorted (rclcpp's
    /// `get_node_names`): this context's and those of other processes and
    /// hosts its transports see. Through shared memory a node is seen by
    /// its endpoints (every node has some: its type-description service,
    /// unless turned off); through zenoh by its liveliness token too.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let ctx = myelin_core::Context::builder().handle_signals(false).build()?;
    /// let node = ctx.create_node_in("camera", "/robot")?;
    /// assert!(node.node_names().contains(&"/robot/camera".to_string()));
    /// # Ok(()) }
    /// ```
    pub fn node_names(&self) -> Vec<String> {
        self.inner.ctx.graph_nodes()
    }

    /// Publishers on `topic` (expanded as for a publisher), of any type,
    /// in this context and the other processes and hosts its transports
    /// see (rclcpp's `count_publishers`; see
    /// [`topic_names_and_types`](Self::topic_names_and_types) for what
    /// each transport sees).
    ///
    /// ```
    /// # use myelin_core::{Context, QoS};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let ctx = Context::builder()
    ///     .handle_signals(false)
    ///     // This context only: counts would include other processes' endpoints.
    ///     .shared_memory(false)
    ///     .network(false)
    ///     .build()?;
    /// let node = ctx.create_node("counter")?;
    /// let _p = node.create_publisher::<u32>("chatter", QoS::keep_last(1))?;
    /// assert_eq!(node.count_publishers("chatter")?, 1);
    /// assert_eq!(node.count_subscribers("/chatter")?, 0);
    /// # Ok(()) }
    /// ```
    pub fn count_publishers(&self, topic: &str) -> Result<usize, names::NameError> {
        let graph = &self.inner.ctx.graph;
        Ok(self.count(topic, |t| graph.topic_counts_any(t), None)?.0)
    }

    /// Subscriptions on `topic`, of any type, in this context and the
    /// other processes and hosts its transports see (rclcpp's
    /// `count_subscribers`; see [`count_publishers`](Self::count_publishers)).
    pub fn count_subscribers(&self, topic: &str) -> Result<usize, names::NameError> {
        let graph = &self.inner.ctx.graph;
        Ok(self.count(topic, |t| graph.topic_counts_any(t), None)?.1)
    }

    /// (Publishers, subscriptions) on `topic` carrying `T`, in this
    /// context and the other processes and hosts its transports see
    /// (see [`count_publishers`](Self::count_publishers)).
    ///
    /// ```
    /// # use myelin_core::{Context, QoS};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let ctx = Context::builder()
    ///     .handle_signals(false)
    ///     // This context only: counts would include other processes' endpoints.
    ///     .shared_memory(false)
    ///     .network(false)
    ///     .build()?;
    /// let node = ctx.create_node("typed_counter")?;
    /// let _s = node.create_polling_subscription::<u32>("n", QoS::keep_last(1), Default::default())?;
    /// assert_eq!(node.count_endpoints::<u32>("n")?, (0, 1));
    /// assert_eq!(node.count_endpoints::<u64>("n")?, (0, 0));
    /// # Ok(()) }
    /// ```
    pub fn count_endpoints<T: Message>(
        &self,
        topic: &str,
    ) -> Result<(usize, usize), names::NameError> {
        let graph = &self.inner.ctx.graph;
        self.count(topic, |t| graph.topic_counts::<T>(t), Some(T::TYPE_NAME))
    }

    /// This context's counts on the expanded `topic` (`local`) plus the
    /// other contexts' endpoints on it (of type `ty` if given).
    fn count(
        &self,
        topic: &str,
        local: impl FnOnce(&str) -> (usize, usize),
        ty: Option<&str>,
    ) -> Result<(usize, usize), names::NameError> {
        let topic = self.resolve_topic_name(topic)?;
        let (mut pubs, mut subs) = local(&topic);
        for e in self.inner.ctx.graph_endpoints() {
            if e.topic != topic || ty.is_some_and(|ty| e.type_name != ty) {
                continue;
            }
            if e.is_publisher {
                pubs += 1;
            } else {
                subs += 1;
            }
        }
        Ok((pubs, subs))
    }
}

impl std::fmt::Debug for Node {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Node")
            .field("fqn", &self.inner.fqn)
            .finish()
    }
}

/// Say once per type that a type without a wire encoding stays in its
/// process while other transports are running (where a user expects it to
/// cross and would otherwise see nothing arrive).
fn warn_local_type(type_name: &'static str, topic: &str) {
    use std::collections::HashSet;
    use std::sync::Mutex;
    static WARNED: Mutex<Option<HashSet<&'static str>>> = Mutex::new(None);
    let first = WARNED
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get_or_insert_with(HashSet::new)
        .insert(type_name);
    if first {
        tracing::warn!(
            "topic {topic:?}: {type_name} has no wire encoding, so its messages stay in this \
             process (other processes and hosts never see them); derive it with \
             #[message(cdr)] (serde) or #[message(pod)] (plain old data) to send it"
        );
    }
}

/// The buffer a callback subscription gets: what `buffer` asks for, or by
/// default what the callback's signature wants (owned or shared).
fn callback_delivery(buffer: BufferKind, wants_ownership: bool) -> Delivery {
    match buffer {
        BufferKind::CallbackDefault if wants_ownership => Delivery::Owned,
        BufferKind::CallbackDefault => Delivery::Shared,
        BufferKind::Owned => Delivery::Owned,
        BufferKind::Shared => Delivery::Shared,
        BufferKind::Value => Delivery::Value,
    }
}
