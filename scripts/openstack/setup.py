"""Identity, catalog and resources of the loopback OpenStack control plane; run by
scripts/start-openstack with openstacksdk (the project's venv, else Debian's python3).
Idempotent: every step looks before it creates; a password is set again only when it no
longer logs in (a change revokes the tokens of running services).

    setup.py identity    after `keystone-manage bootstrap`: roles, the service project and
                         its users, the catalog, Heat's stack-user domain, the tenant project
                         and its user
    setup.py resources   once the services run: flavors, the base image, the tenant network,
                         the tenant's baseline quotas, warm-ups; writes cloud.json and
                         clouds.yaml
    setup.py real        once the libvirt compute host runs (scripts/openstack/real-compute.sh):
                         its aggregate and zone, a flavor, the base cloud image (kernel,
                         ramdisk, disk), the guests' network; adds `real` to cloud.json

Everything comes from the environment (WT_OS_*), set by scripts/start-openstack.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import openstack
from openstack import exceptions

E = os.environ
DIR = Path(E["WT_OS_DIR"])
REGION = "RegionOne"
HOST = "127.0.0.1"
PORTS = {
    name: int(E[f"WT_OS_PORT_{name.upper()}"])
    for name in ("keystone", "glance", "placement", "nova", "neutron", "heat")
}
AUTH_URL = f"http://{HOST}:{PORTS['keystone']}/v3"

SERVICE_USERS = ("glance", "placement", "nova", "neutron", "heat")
# (name, type, url); Heat's %(tenant_id)s is how its catalog entry is usually written
CATALOG = (
    ("glance", "image", f"http://{HOST}:{PORTS['glance']}"),
    ("placement", "placement", f"http://{HOST}:{PORTS['placement']}"),
    ("nova", "compute", f"http://{HOST}:{PORTS['nova']}/v2.1"),
    ("neutron", "network", f"http://{HOST}:{PORTS['neutron']}"),
    ("heat", "orchestration", f"http://{HOST}:{PORTS['heat']}/v1/%(tenant_id)s"),
)
TENANT_PROJECT = "windtunnel-test"
TENANT_USER = "wt-tester"
HEAT_DOMAIN = "heat"
HEAT_DOMAIN_ADMIN = "heat_domain_admin"
FLAVORS = (  # name, vcpus, ram MB, disk GB
    ("wt.small", 1, 1024, 5),
    ("wt.medium", 2, 2048, 10),
    ("wt.large", 4, 4096, 20),
    ("wt.xlarge", 8, 8192, 20),
)
IMAGE = "wt-base"
NETWORK, SUBNET, CIDR = "wt-net", "wt-subnet", "10.77.0.0/24"
# the tenant's starting compute quotas: room for ~50 small servers; tests lower them
BASE_QUOTAS = {"instances": 50, "cores": 100, "ram": 204800}


def say(message: str) -> None:
    print(f"\033[1m[start-openstack]\033[0m {message}", flush=True)


def auth(user: str, password: str, project: str | None = None, **scope: str) -> dict[str, str]:
    fields = {
        "auth_url": AUTH_URL,
        "username": user,
        "password": password,
        "user_domain_name": scope.get("user_domain_name", "Default"),
    }
    if project:
        fields |= {"project_name": project, "project_domain_name": "Default"}
    return fields


ADMIN_AUTH = auth("admin", E["WT_OS_ADMIN_PASSWORD"], "admin")
TENANT_AUTH = auth(TENANT_USER, E["WT_OS_TENANT_PASSWORD"], TENANT_PROJECT)


def connect(fields: dict[str, str]) -> openstack.connection.Connection:
    return openstack.connect(
        load_yaml_config=False,
        load_envvars=False,
        region_name=REGION,
        interface="public",
        identity_api_version="3",
        auth=dict(fields),
    )


def retry(what: str, call: Any, timeout: float = 120.0) -> Any:
    """Calls `call` until it stops raising (services that are up but not yet ready)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return call()
        except (exceptions.SDKException, OSError) as error:
            if time.monotonic() > deadline:
                raise SystemExit(f"{what}: {error}") from error
            time.sleep(1)


# -- identity ------------------------------------------------------------------------------


def ensure_user(ks: Any, name: str, domain_id: str, password: str, **extra: Any) -> Any:
    """Created, or its password set only when it does not log in: a password change revokes
    the tokens of the services that already run."""
    user = first(ks.users(name=name, domain_id=domain_id))
    if user is None:
        return ks.create_user(name=name, domain_id=domain_id, password=password, **extra)
    try:
        openstack.connect(
            load_yaml_config=False,
            load_envvars=False,
            region_name=REGION,
            auth={
                "auth_url": AUTH_URL,
                "username": name,
                "password": password,
                "user_domain_id": domain_id,
            },
        ).authorize()
    except exceptions.HttpException:
        user = ks.update_user(user, password=password)
    return user


def first(resources: Any) -> Any:
    """The first of a filtered list, or None (find_* would ask by id first: a logged 404)."""
    return next(iter(resources), None)


def ensure_project(ks: Any, name: str, domain_id: str, description: str) -> Any:
    project = first(ks.projects(name=name, domain_id=domain_id))
    return project or ks.create_project(name=name, domain_id=domain_id, description=description)


def identity() -> None:
    admin = connect(ADMIN_AUTH)
    ks = admin.identity
    roles = {role.name: role for role in retry("keystone", lambda: list(ks.roles()))}
    for name in ("member", "reader", "service", "heat_stack_owner", "heat_stack_user"):
        if name not in roles:
            roles[name] = ks.create_role(name=name)

    service = ensure_project(ks, "service", "default", "OpenStack service users")
    for name in SERVICE_USERS:
        user = ensure_user(ks, name, "default", E["WT_OS_SERVICE_PASSWORD"])
        for role in ("admin", "service"):  # service: keystonemiddleware trusts its tokens
            ks.assign_project_role_to_user(service, user, roles[role])

    for name, kind, url in CATALOG:
        found = [s for s in ks.services() if s.type == kind]
        svc = found[0] if found else ks.create_service(name=name, type=kind, is_enabled=True)
        for interface in ("public", "internal", "admin"):
            endpoints = list(ks.endpoints(service_id=svc.id, interface=interface))
            endpoints = [e for e in endpoints if e.region_id in (REGION, None)]
            if not endpoints:
                ks.create_endpoint(
                    service_id=svc.id, interface=interface, url=url, region_id=REGION
                )
            elif endpoints[0].url != url:
                ks.update_endpoint(endpoints[0], url=url)

    # Heat keeps the users it makes for stacks (signals, wait conditions) in their own domain
    domain = first(ks.domains(name=HEAT_DOMAIN)) or ks.create_domain(
        name=HEAT_DOMAIN, description="Heat stack users"
    )
    heat_admin = ensure_user(ks, HEAT_DOMAIN_ADMIN, domain.id, E["WT_OS_HEAT_DOMAIN_PASSWORD"])
    ks.assign_domain_role_to_user(domain, heat_admin, roles["admin"])

    project = ensure_project(ks, TENANT_PROJECT, "default", "Windtunnel's test tenant")
    user = ensure_user(
        ks, TENANT_USER, "default", E["WT_OS_TENANT_PASSWORD"], default_project_id=project.id
    )
    for role in ("member", "reader"):
        ks.assign_project_role_to_user(project, user, roles[role])


# -- resources -----------------------------------------------------------------------------


def wait_for_compute(admin: Any, host: str = "windtunnel-compute") -> str:
    """Conductor, scheduler and the compute host `host` up (the fake one by default)."""
    deadline = time.monotonic() + 180
    while True:
        services = retry("nova", lambda: list(admin.compute.services()))
        up = {(s.binary, s.host) for s in services if s.state == "up" and s.status == "enabled"}
        binaries = {binary for binary, _host in up}
        if {"nova-conductor", "nova-scheduler"} <= binaries and ("nova-compute", host) in up:
            return host
        if time.monotonic() > deadline:
            raise SystemExit(f"nova services not up: {[(s.binary, s.state) for s in services]}")
        time.sleep(1)


def resources() -> None:
    admin = connect(ADMIN_AUTH)
    tenant = connect(TENANT_AUTH)
    project = first(admin.identity.projects(name=TENANT_PROJECT, domain_id="default"))
    host = wait_for_compute(admin)

    flavors = []
    for name, vcpus, ram, disk in FLAVORS:
        flavor = admin.compute.find_flavor(name, ignore_missing=True)
        if flavor is None:
            flavor = admin.compute.create_flavor(
                name=name, vcpus=vcpus, ram=ram, disk=disk, is_public=True
            )
        flavors.append({"name": name, "id": flavor.id, "vcpus": vcpus, "ram": ram, "disk": disk})

    image = None
    for candidate in retry("glance", lambda: list(admin.image.images(name=IMAGE))):
        if candidate.status == "active" and image is None:
            image = candidate
        else:  # an upload cut short by an earlier run
            admin.image.delete_image(candidate, ignore_missing=True)
    if image is None:
        say(f"uploading image {IMAGE}")
        disk = DIR / "wt-base.raw"
        disk.write_bytes(b"\0" * 65536)  # the fake driver never boots it
        image = admin.image.create_image(
            IMAGE,
            filename=str(disk),
            disk_format="raw",
            container_format="bare",
            visibility="public",
            wait=True,
            timeout=120,
        )

    # A fresh neutron-server answers its first port list with a 500: warm it up.
    for conn in (admin, tenant):
        retry("neutron", lambda conn=conn: list(conn.network.ports(limit=1)))
    network = tenant.network.find_network(NETWORK)
    if network is None:
        network = tenant.network.create_network(name=NETWORK)
    subnet = tenant.network.find_subnet(SUBNET)
    if subnet is None:
        subnet = tenant.network.create_subnet(
            name=SUBNET, network_id=network.id, ip_version=4, cidr=CIDR, enable_dhcp=True
        )

    marker = DIR / "state" / "quotas-baseline"
    if not marker.exists():
        admin.set_compute_quotas(project.id, **BASE_QUOTAS)
        marker.write_text(json.dumps(BASE_QUOTAS))
    retry("heat", lambda: list(tenant.orchestration.stacks()))

    clouds = {
        "windtunnel-admin": {"auth": ADMIN_AUTH},
        "windtunnel-tenant": {"auth": TENANT_AUTH},
    }
    for cloud in clouds.values():
        cloud |= {"region_name": REGION, "interface": "public", "identity_api_version": 3}
    clouds_yaml = DIR / "clouds.yaml"
    # JSON is YAML: openstacksdk and the openstack CLI read it as clouds.yaml
    write_private(clouds_yaml, json.dumps({"clouds": clouds}, indent=2) + "\n")

    facts = {
        "auth_url": AUTH_URL,
        "region": REGION,
        "clouds_yaml": str(clouds_yaml),
        "clouds": {"admin": "windtunnel-admin", "tenant": "windtunnel-tenant"},
        "admin": ADMIN_AUTH | {"project_domain_name": "Default"},
        "tenant": TENANT_AUTH | {"project_id": project.id},
        "compute_host": host,
        "flavors": flavors,
        "image": {"name": IMAGE, "id": image.id, "disk_format": "raw"},
        "network": {
            "name": NETWORK,
            "id": network.id,
            "subnet": SUBNET,
            "subnet_id": subnet.id,
            "cidr": CIDR,
        },
        "base_quotas": BASE_QUOTAS,
        "heat": {"stack_user_domain": HEAT_DOMAIN},
        "microversions": {"compute_min_for_networks_none": "2.37"},
        "ports": PORTS,
        "endpoints": {kind: url for _, kind, url in CATALOG} | {"identity": AUTH_URL},
        "log_dir": str(DIR / "log"),
    }
    write_private(DIR / "cloud.json", json.dumps(facts, indent=2) + "\n")


REAL_ZONE = "wt-real"
REAL_NETWORK, REAL_SUBNET, REAL_CIDR = "wt-real-net", "wt-real-subnet", "10.77.1.0/24"


def _image(admin: Any, name: str, path: Path, **fields: Any) -> Any:
    """The public image `name` (uploaded from `path` when there is no active one)."""
    found = None
    for candidate in retry("glance", lambda: list(admin.image.images(name=name))):
        if candidate.status == "active" and found is None:
            found = candidate
        else:
            admin.image.delete_image(candidate, ignore_missing=True)
    if found is not None:
        return found
    say(f"uploading image {name} ({path.stat().st_size // 1024**2} MB)")
    return admin.image.create_image(
        name, filename=str(path), visibility="public", wait=True, timeout=600, **fields
    )


def real() -> None:
    """The real compute host's zone, flavor, base image and network; `real` in cloud.json."""
    admin = connect(ADMIN_AUTH)
    host = wait_for_compute(admin, E["WT_OS_REAL_HOST"])
    aggregate = first(a for a in admin.compute.aggregates() if a.name == REAL_ZONE)
    if aggregate is None:
        aggregate = admin.compute.create_aggregate(name=REAL_ZONE, availability_zone=REAL_ZONE)
    if host not in (aggregate.hosts or []):
        admin.compute.add_host_to_aggregate(aggregate, host)
    name, vcpus, ram, disk = FLAVORS[0]  # the smallest: 1 vCPU, 1 GB
    flavor = admin.compute.find_flavor(name, ignore_missing=True)

    folder = Path(E["WT_OS_REAL_IMAGE"])
    record = json.loads((folder / "image.json").read_text())
    tag = str(record["digest"])[:12]
    kernel = _image(
        admin,
        f"wt-real-kernel-{tag}",
        folder / "vmlinuz",
        disk_format="aki",
        container_format="aki",
    )
    ramdisk = _image(
        admin,
        f"wt-real-ramdisk-{tag}",
        folder / "initrd.img",
        disk_format="ari",
        container_format="ari",
    )
    cmdline = str(record.get("kernel_cmdline") or "root=LABEL=wtroot ro console=ttyS0")
    image = _image(
        admin,
        f"wt-real-base-{tag}",
        folder / "disk.qcow2",
        disk_format="qcow2",
        container_format="bare",
        kernel_id=kernel.id,
        ramdisk_id=ramdisk.id,
        os_command_line=cmdline,
    )

    network = admin.network.find_network(REAL_NETWORK)
    if network is None:
        network = admin.network.create_network(name=REAL_NETWORK, is_shared=True)
    subnet = admin.network.find_subnet(REAL_SUBNET)
    if subnet is None:  # no DHCP: a guest takes its address from its config drive
        subnet = admin.network.create_subnet(
            name=REAL_SUBNET,
            network_id=network.id,
            ip_version=4,
            cidr=REAL_CIDR,
            gateway_ip=E["WT_OS_REAL_GATEWAY"],
            is_dhcp_enabled=False,
            allocation_pools=[{"start": "10.77.1.10", "end": "10.77.1.200"}],
        )
    facts = json.loads((DIR / "cloud.json").read_text())
    facts["real"] = {
        "host": host,
        "zone": REAL_ZONE,
        "flavor": {"name": name, "id": flavor.id, "vcpus": vcpus, "ram": ram, "disk": disk},
        "image": {"name": image.name, "id": image.id, "folder": str(folder)},
        "network": {"name": REAL_NETWORK, "id": network.id, "subnet_id": subnet.id},
        "gateway": E["WT_OS_REAL_GATEWAY"],
        "netns": E["WT_OS_REAL_NETNS"],
        "log": str(DIR / "log" / "nova-compute-real.log"),
    }
    write_private(DIR / "cloud.json", json.dumps(facts, indent=2) + "\n")


def write_private(path: Path, text: str) -> None:
    """Written whole (readers never see half a file), mode 0600: it holds passwords."""
    tmp = path.with_suffix(".new")
    tmp.write_text(text)
    tmp.chmod(0o600)
    tmp.replace(path)


if __name__ == "__main__":
    {"identity": identity, "resources": resources, "real": real}[sys.argv[1]]()
