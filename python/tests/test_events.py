"""QoS event callbacks (rclpy's ``event_callbacks``): each event reaches
its callback with rclpy's info fields, through the executor."""

import time

import pytest

from myelin.event_handler import (
    MatchedInfo,
    PublisherEventCallbacks,
    QoSPolicyKind,
    SubscriptionEventCallbacks,
    UnsupportedEventTypeError,
)
from myelin.msgs.std_msgs.msg import String
from myelin.qos import QoSProfile, ReliabilityPolicy

from conftest import spin_until


def test_matched_events_count_changes_since_the_last_one(node):
    sub_events, pub_events = [], []
    node.create_subscription(
        String,
        "matched",
        lambda m: None,
        10,
        event_callbacks=SubscriptionEventCallbacks(matched=sub_events.append),
    )
    pub = node.create_publisher(
        String,
        "matched",
        10,
        event_callbacks=PublisherEventCallbacks(matched=pub_events.append),
    )
    spin_until(node, lambda: sub_events and pub_events)
    one = MatchedInfo(total_count=1, total_count_change=1, current_count=1, current_count_change=1)
    assert sub_events == [one]
    assert pub_events == [one]
    node.destroy_publisher(pub)
    spin_until(node, lambda: len(sub_events) == 2)
    assert sub_events[1] == MatchedInfo(
        total_count=1, total_count_change=0, current_count=0, current_count_change=-1
    )


def test_incompatible_qos_names_the_policy_on_both_sides(node):
    sub_events, pub_events = [], []
    node.create_subscription(
        String,
        "picky",
        lambda m: None,
        QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE),
        event_callbacks=SubscriptionEventCallbacks(incompatible_qos=sub_events.append),
    )
    node.create_publisher(
        String,
        "picky",
        QoSProfile(depth=10, reliability=ReliabilityPolicy.BEST_EFFORT),
        event_callbacks=PublisherEventCallbacks(incompatible_qos=pub_events.append),
    )
    spin_until(node, lambda: sub_events and pub_events)
    for events in (sub_events, pub_events):
        assert events[0].total_count == 1
        assert events[0].total_count_change == 1
        assert events[0].last_policy_kind is QoSPolicyKind.RELIABILITY


def test_without_a_callback_incompatible_qos_is_a_warning_unless_turned_off(node, monkeypatch):
    warnings = []
    monkeypatch.setattr(node.get_logger(), "warning", warnings.append)
    node.create_subscription(String, "warned", lambda m: None, 10)
    node.create_subscription(
        String,
        "quiet",
        lambda m: None,
        10,
        event_callbacks=SubscriptionEventCallbacks(use_default_callbacks=False),
    )
    best_effort = QoSProfile(depth=10, reliability=ReliabilityPolicy.BEST_EFFORT)
    node.create_publisher(String, "quiet", best_effort)
    node.create_publisher(String, "warned", best_effort)
    # The two publishers warn (default callbacks), and the subscription of
    # "warned"; the one of "quiet" does not.
    spin_until(node, lambda: len(warnings) >= 3)
    offering = [w for w in warnings if "offering incompatible QoS" in w]
    requesting = [w for w in warnings if "requesting incompatible QoS" in w]
    assert len(offering) == 1 and "RELIABILITY" in offering[0], warnings
    assert len(requesting) == 2, warnings
    time.sleep(0.2)
    spin_until(node, lambda: True)
    assert len(warnings) == 3, warnings


def test_a_missed_deadline_is_reported_on_both_sides(node):
    sub_events, pub_events = [], []
    qos = QoSProfile(depth=10, deadline=0.05)
    node.create_subscription(
        String,
        "heartbeat",
        lambda m: None,
        qos,
        event_callbacks=SubscriptionEventCallbacks(deadline=sub_events.append),
    )
    pub = node.create_publisher(
        String,
        "heartbeat",
        qos,
        event_callbacks=PublisherEventCallbacks(deadline=pub_events.append),
    )
    pub.publish(String(data="once"))
    # Nothing more is published: both deadlines pass, again and again.
    spin_until(node, lambda: sub_events and pub_events)
    assert sub_events[0].total_count >= 1 and sub_events[0].total_count_change >= 1
    assert pub_events[0].total_count >= 1


def test_an_exception_in_an_event_callback_comes_out_of_spin_once(node):
    def boom(info):
        raise RuntimeError("from the event callback")

    node.create_subscription(
        String,
        "raises",
        lambda m: None,
        10,
        event_callbacks=SubscriptionEventCallbacks(matched=boom),
    )
    node.create_publisher(String, "raises", 10)
    with pytest.raises(RuntimeError, match="from the event callback"):
        spin_until(node, lambda: False, timeout=30)


def test_events_myelin_does_not_raise_are_refused_not_ignored(node):
    with pytest.raises(UnsupportedEventTypeError, match="message_lost"):
        SubscriptionEventCallbacks(message_lost=lambda info: None)
    with pytest.raises(UnsupportedEventTypeError, match="liveliness-lost"):
        PublisherEventCallbacks(liveliness=lambda info: None)
    with pytest.raises(TypeError, match="callable"):
        SubscriptionEventCallbacks(matched=42)
    with pytest.raises(TypeError, match="SubscriptionEventCallbacks"):
        node.create_subscription(
            String, "t", lambda m: None, 10, event_callbacks=PublisherEventCallbacks()
        )
