export { BackendsTable, ImagesTable, PackagesTable, TenantsTable } from "./components/admin-tables";
export { NewBackendButton } from "./components/backend-forms";
export { ComposeImageButton } from "./components/image-forms";
export { NewTenantButton } from "./components/tenant-forms";
export { useAdminOverview, useAdminTenants, usePools } from "./hooks/use-admin";
export { PoolsPanel } from "./components/pools-panel";
export { NewPoolButton } from "./components/pool-forms";
export { RunsPanel } from "./components/runs-panel";
