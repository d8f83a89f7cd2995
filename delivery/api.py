"""Delivery's front door: what another app (the trainings domain) may use of it, besides its tables
(delivery/models.py). Publish push documents to the push queue, register and forget devices, read the
channel table for its pages and forms, replay dead letters, count what it published, and tell delivery what
it needs to know of the domain (`domain_register`, delivery/domain.py). tests/delivery/test_door.py fails
when trainings/ imports anything else of delivery, or delivery anything of trainings/.
"""

from __future__ import annotations

from delivery.channels.email.message import unsubscribe_read as unsubscribe_read
from delivery.channels.email.message import words as words
from delivery.channels.registry import BY_NAME as BY_NAME
from delivery.channels.registry import PLATFORMS as PLATFORMS
from delivery.channels.registry import device_platform_choices as device_platform_choices
from delivery.channels.registry import device_provider_choices as device_provider_choices
from delivery.channels.registry import standin_names as standin_names
from delivery.channels.registry import standin_words as standin_words
from delivery.devices import device_register as device_register
from delivery.devices import device_remove as device_remove
from delivery.devices import token_preview as token_preview
from delivery.domain import Asked as Asked
from delivery.domain import PushOutcome as PushOutcome
from delivery.domain import domain_register as domain_register
from delivery.gateway.dead_letter_queue import ReplayRefused as ReplayRefused
from delivery.gateway.dead_letter_queue import dead_letters_pass as dead_letters_pass
from delivery.gateway.dead_letter_queue import dead_letters_replay as dead_letters_replay
from delivery.gateway.metrics import held_pushes_overdue as held_pushes_overdue
from delivery.gateway.metrics import pushes_queued as pushes_queued
from delivery.gateway.queue import QueuedPush as QueuedPush
from delivery.gateway.queue import Refusals as Refusals
from delivery.gateway.queue import batch_body as batch_body
from delivery.gateway.queue import batch_key as batch_key
from delivery.gateway.queue import push_queue_names as push_queue_names
from delivery.gateway.queue import push_queue_publisher as push_queue_publisher
