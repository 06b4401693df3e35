export { BackendsTable, ImagesTable, PackagesTable, TenantsTable } from "./components/admin-tables";
export { useAdminOverview, useAdminTenants } from "./hooks/use-admin";
