"""An ML2 mechanism driver that binds every port and plugs nothing (loopback test cloud only).

Neutron's ML2 marks a port `binding_failed` when no mechanism driver binds it, and Nova then
refuses to build a server on it (PortBindingFailed). The real drivers (Open vSwitch, Linux
bridge, OVN) need their agents or databases; this control plane has neither, because Nova's
fake compute driver never boots anything. So this driver binds each port to its first segment
with VIF type "other" and reports it ACTIVE, as if an agent had wired it. A port of the real
compute host (windtunnel-real, scripts/openstack/real-compute.sh) is bound as a Linux bridge
port on wtbr0, which libvirt plugs the guest into (port_filter: no iptables rules, which this
machine has no use for: the bridge leads nowhere but to the gateway namespace).

scripts/start-openstack puts this file and an entry point named `wt_noop` on neutron-server's
PYTHONPATH.
"""

from neutron_lib import constants
from neutron_lib.api.definitions import portbindings
from neutron_lib.plugins.ml2 import api

REAL_HOST = "windtunnel-real"
REAL_BRIDGE = "wtbr0"


class NoopMechanismDriver(api.MechanismDriver):
    def initialize(self):
        pass

    @property
    def connectivity(self):
        return portbindings.CONNECTIVITY_L2

    def bind_port(self, context):
        real = context.host == REAL_HOST
        for segment in context.segments_to_bind:
            context.set_binding(
                segment[api.ID],
                portbindings.VIF_TYPE_BRIDGE if real else portbindings.VIF_TYPE_OTHER,
                {
                    portbindings.CAP_PORT_FILTER: real,
                    **({portbindings.VIF_DETAILS_BRIDGE_NAME: REAL_BRIDGE} if real else {}),
                },
                status=constants.PORT_STATUS_ACTIVE,
            )
            return
