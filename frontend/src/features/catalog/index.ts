export { TemplateCards } from "./components/template-cards";
export { useBackends, usePackages, useTemplates } from "./hooks/use-catalog";
