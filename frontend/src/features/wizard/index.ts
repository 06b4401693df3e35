export { StudyWizard } from "./components/study-wizard";
export { impactSentence } from "./lib/impact";
export { fetchUpload } from "./api/wizard";
export { emptyForm, formFromSpec, formFromTemplate, type WizardForm } from "./lib/form";
export { toSpec } from "./lib/to-spec";
