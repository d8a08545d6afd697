"""Service runtime: describe RPC services (ServiceSpec) and run them under a trio Supervisor."""

from rpent.services.spec import ServiceSpec
from rpent.services.supervisor import RunningService, ServiceStartError, ServiceState, Supervisor

__all__ = ["ServiceSpec", "Supervisor", "RunningService", "ServiceState", "ServiceStartError"]
