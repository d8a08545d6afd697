"""Exceptions of :mod:`rpent.cluster`.

Hierarchy::

    ClusterError              base class
    ├── ClusterConfigError    bad ``ray`` settings or a placement the cluster cannot satisfy (ValueError)
    │   └── ClusterBusyError  the placement fits the cluster's totals but not what is free now
    ├── ClusterConnectError   Ray is not installed or the cluster did not answer in time
    └── ReplicaPoolError      no replica of a role is left (every one died and could not be restarted)
"""

from __future__ import annotations


class ClusterError(Exception):
    """Base class of every :mod:`rpent.cluster` error."""


class ClusterConfigError(ClusterError, ValueError):
    """The ``ray`` settings are malformed, or the cluster cannot place what they ask for."""


class ClusterBusyError(ClusterConfigError):
    """The cluster could hold the placement, but other jobs hold the resources it needs right now."""


class ClusterConnectError(ClusterError):
    """Ray is missing (``pip install -e ".[ray]"``) or the cluster address did not answer in time."""


class ReplicaPoolError(ClusterError):
    """A replica pool has no live replica left (each one died and its restarts are spent)."""
