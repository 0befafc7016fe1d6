"""Client quotas (KIP-13, KIP-55, KIP-124): the quota configs of users and client ids, the
rates measured against them, the throttle times a violation earns, and where the configs are
stored. Pure arithmetic in ``rate`` and ``entities``; the per-client sensors in ``manager``;
the ZooKeeper and standalone storage in ``store``."""
