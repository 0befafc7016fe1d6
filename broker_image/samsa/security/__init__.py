"""Security: TLS contexts, SASL mechanisms (PLAIN, SCRAM), principals, and the ACL authorizer
with its store. Used by `network` (authentication per connection) and by `handlers`
(authorization per operation)."""

from samsa.security.principal import ANONYMOUS, KafkaPrincipal
from samsa.security.tls import client_context, server_context

__all__ = ["ANONYMOUS", "KafkaPrincipal", "client_context", "server_context"]
