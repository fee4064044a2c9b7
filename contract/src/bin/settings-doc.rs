//! Prints the reference page of every setting, `docs/settings.md`, from the settings table.

fn main() {
    print!("{}", gsm_contract::doc::render(gsm_contract::table::ALL));
}
