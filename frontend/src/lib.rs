//! The browser entry point: hydrates the page the server rendered. Nothing else lives here.

#[wasm_bindgen::prelude::wasm_bindgen]
pub fn hydrate() {
    console_error_panic_hook::set_once();
    // The page's code comes in page groups (wasm chunks): load the one of the page shown
    // first, then hydrate in one go.
    wasm_bindgen_futures::spawn_local(async {
        app::ui::load_page_group().await;
        leptos::mount::hydrate_body(app::ui::App);
    });
}
