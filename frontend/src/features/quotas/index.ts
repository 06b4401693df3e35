export { QuotaGauges, QuotaLine } from "./components/quota-gauges";
export { useQuota } from "./hooks/use-quota";
